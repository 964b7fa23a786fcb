"""What a Git pack inflates to, read as it arrives: ``PackWalker.feed`` takes the pack's bytes in
whatever chunks the server sends and sums what its objects declare they inflate to, so a fetch
stops (``InflatedOverBudget``) before dulwich inflates a small pack into a large memory (a blob of
one repeated byte: zlib shrinks it about a thousand times).

The pack format (Git's Documentation/gitformat-pack.txt): ``PACK``, a version (2 or 3) and an
object count, 4 bytes each; then each object: a header whose first byte holds its type (bits 4-6)
and the low 4 bits of its inflated size, the size's next bits 7 a byte while the high bit is set;
an OFS_DELTA's base offset (a varint) or a REF_DELTA's base object name (20 bytes, 32 in a SHA-256
repository: not supported here, as tagpin's fetch is SHA-1); then the zlib stream. A delta's
inflated data starts with two varints (7 bits a byte, low bits first): its base's size and the size
of the object it makes, which dulwich's ``apply_delta`` never exceeds. Counted for each object:
its inflated size, for a delta the larger of its data and its result, and ``PER_OBJECT`` for what
an object costs held in memory whatever its size. Each zlib stream is inflated here, in pieces of
``PIECE`` bytes thrown away, to find where it ends; one inflating to more than its header declared
is a malformed pack (``BadPack``), as one cut short or not a pack at all.
"""

from __future__ import annotations

import zlib
from collections.abc import Generator

OFS_DELTA, REF_DELTA = 6, 7
TYPES = {1, 2, 3, 4, OFS_DELTA, REF_DELTA}  # commit, tree, blob, tag, the deltas
NAME = 20  # a REF_DELTA's base object name (SHA-1)
PIECE = 64 * 1024  # inflated at most at a time, then thrown away
WINDOW = 16 * 1024  # given to zlib at a time: it copies what it leaves (an object's end: the next ones)
PER_OBJECT = 1024  # measured: 20,000 tiny blobs (and their trees) held 19 MiB read by dulwich
VARINT_MAX = 10  # bytes of a size's varint: 70 bits, more than any size


class BadPack(Exception):
    """The server's pack is malformed: cut short, not a pack, or an object larger than declared."""


class InflatedOverBudget(Exception):
    def __init__(self, budget: int) -> None:
        super().__init__(budget)
        self.budget = budget


type _Steps = Generator[None]


class PackWalker:
    """Feed it a pack's bytes in order (``feed``), then ``finish``: ``inflated`` is what its
    objects declared so far, counted as the module says; past ``budget`` ``InflatedOverBudget``."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.inflated = 0
        self.objects = 0  # walked whole
        self.count: int | None = None  # declared in the pack's header
        self._buf = bytearray()
        self._at = 0  # bytes of _buf walked
        self._done = False
        self._steps = self._walk()
        next(self._steps)

    def feed(self, data: bytes) -> None:
        if self._done or not data:
            return  # the trailer (the pack's checksum) and anything after it: dulwich checks them
        self._buf += data
        try:
            self._steps.send(None)
        except StopIteration:
            self._done = True
        del self._buf[: self._at]
        self._at = 0

    def finish(self) -> None:
        """Nothing was sent (nothing was wanted) or a whole pack was: else ``BadPack``."""
        if self.count is None and not self._buf:
            return
        if not self._done:
            raise BadPack(f"it ends after {self.objects} of {self.count or '?'} objects")

    # -- the walk: a generator that yields when it needs more bytes ---------------------------

    def _count(self, size: int) -> None:
        self.inflated += size
        if self.inflated > self.budget:
            raise InflatedOverBudget(self.budget)

    def _take(self, n: int) -> Generator[None, None, bytes]:
        while len(self._buf) - self._at < n:
            yield
        taken = bytes(self._buf[self._at : self._at + n])
        self._at += n
        return taken

    def _walk(self) -> _Steps:
        head = yield from self._take(12)
        if head[:4] != b"PACK" or int.from_bytes(head[4:8]) not in (2, 3):
            raise BadPack(f"it does not start as a pack (version 2 or 3): {head[:8]!r}")
        self.count = int.from_bytes(head[8:12])
        for _ in range(self.count):
            yield from self._object()
            self.objects += 1

    def _object(self) -> _Steps:
        first = (yield from self._take(1))[0]
        kind, size, shift, more = (first >> 4) & 7, first & 0x0F, 4, first & 0x80
        while more:
            byte = (yield from self._take(1))[0]
            size |= (byte & 0x7F) << shift
            shift, more = shift + 7, byte & 0x80
            if shift > 7 * VARINT_MAX:
                raise BadPack("an object's size header does not end")
        if kind not in TYPES:
            raise BadPack(f"object {self.objects + 1} has type {kind}, not a Git object's")
        if kind == OFS_DELTA:
            for _ in range(VARINT_MAX):
                if not (yield from self._take(1))[0] & 0x80:
                    break
            else:
                raise BadPack("a delta's base offset does not end")
        elif kind == REF_DELTA:
            yield from self._take(NAME)
        self._count(size + PER_OBJECT)
        yield from self._inflate(size, delta=kind in (OFS_DELTA, REF_DELTA))

    def _inflate(self, size: int, *, delta: bool) -> _Steps:
        """Through the object's zlib stream, ``size`` bytes inflated at most; a delta's result
        size (its second varint) counted when its first bytes are inflated."""
        inflater, out = zlib.decompressobj(), 0
        start: bytes | None = b"" if delta else None
        while not inflater.eof:
            if self._at == len(self._buf):
                yield
            pending = bytes(self._buf[self._at : self._at + WINDOW])  # what zlib copies is bounded
            self._at += len(pending)
            while pending and not inflater.eof:
                try:
                    piece = inflater.decompress(pending, PIECE)
                except zlib.error as exc:
                    raise BadPack(f"object {self.objects + 1}'s data is not zlib: {exc}") from None
                pending = inflater.unconsumed_tail
                out += len(piece)
                if out > size:
                    raise BadPack(f"object {self.objects + 1} inflates to more than its {size} bytes")
                if start is not None:
                    start += piece[: 2 * VARINT_MAX]
                    start = self._result(start, size, ended=inflater.eof)
            self._at -= len(inflater.unused_data)  # the next object's bytes
        if out != size:
            raise BadPack(f"object {self.objects + 1} inflates to {out} bytes, not its {size}")
        if start is not None:
            raise BadPack(f"object {self.objects + 1}, a delta, has no sizes")

    def _result(self, start: bytes, size: int, *, ended: bool) -> bytes | None:
        """The delta's sizes read from its first inflated bytes: ``None`` once counted."""
        values, at = [], 0
        for _ in range(2):
            value, shift = 0, 0
            while True:
                if at == len(start):
                    if ended or len(start) >= 2 * VARINT_MAX:
                        raise BadPack(f"object {self.objects + 1}, a delta, has no sizes")
                    return start  # more to inflate
                byte = start[at]
                at += 1
                value |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            values.append(value)
        self._count(max(0, values[1] - size))  # its data was counted: the larger of the two
        return None
