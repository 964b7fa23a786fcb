"""The pack walker (tagpin.adapters.git.packs) on packs Git itself makes (``git pack-objects``, with
deltas) and on packs made by hand as a hostile server would send them: what it counts is the same
however the bytes are split; a blob or a delta declaring more than the budget stops it at its
header, before its data is inflated; a pack cut short, not a pack, or with an object larger than
declared is ``BadPack``, never another exception."""

from __future__ import annotations

import hashlib
import io
import subprocess
import zlib
from pathlib import Path

import pytest
from dulwich.object_format import DEFAULT_OBJECT_FORMAT as SHA1
from dulwich.pack import PackData
from tagpin.adapters.git.packs import PER_OBJECT, BadPack, InflatedOverBudget, PackWalker

from tests.conftest import require_binary

MiB = 1024 * 1024
BLOB, OFS_DELTA, REF_DELTA = 3, 6, 7


def varint(n: int) -> bytes:  # a delta's sizes: 7 bits a byte, low bits first
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def header(kind: int, size: int) -> bytes:
    out = bytearray([(kind << 4) | (size & 0x0F) | (0x80 if size > 0x0F else 0)])
    size >>= 4
    while size:
        out.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
    return bytes(out)


def obj(kind: int, data: bytes, base: bytes = b"") -> bytes:
    return header(kind, len(data)) + base + zlib.compress(data)


def pack(*objects: bytes) -> bytes:
    body = b"PACK" + (2).to_bytes(4) + len(objects).to_bytes(4) + b"".join(objects)
    return body + hashlib.sha1(body, usedforsecurity=False).digest()


def walk(data: bytes, budget: int = 64 * MiB, *, split: int | None = None) -> PackWalker:
    walker = PackWalker(budget)
    for chunk in [data] if split is None else [data[:split], data[split:]]:
        walker.feed(chunk)
    walker.finish()
    return walker


@pytest.fixture(scope="module", params=[OFS_DELTA, REF_DELTA], ids=["ofs-delta", "ref-delta"])
def git_pack(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> bytes:
    """A pack ``git pack-objects`` makes of two commits of a file edited a little: the second's is
    a delta, against an offset in the pack (as upload-pack sends to dulwich) or an object's name."""
    require_binary("git")
    repo = tmp_path_factory.mktemp("repo")
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a"}
    env |= {"GIT_COMMITTER_EMAIL": "a@x", "HOME": str(repo), "PATH": "/usr/bin:/bin"}

    def git(*args: str, stdin: bytes | None = None) -> bytes:
        return subprocess.run(
            ["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, check=True
        ).stdout

    git("init", "-q")
    text = "".join(f"line {i}: image: registry.example.com/team/web:{i}\n" for i in range(400))
    for n in range(2):
        Path(repo, "a.yaml").write_text(text + f"edit {n}\n")
        git("add", "a.yaml")
        git("commit", "-q", "-m", f"commit {n}")
    offsets = ["--delta-base-offset"] if request.param == OFS_DELTA else []
    made = git("pack-objects", "--stdout", "--revs", "-q", *offsets, stdin=b"HEAD\n")
    kinds = [
        u.pack_type_num for u in PackData.from_file(io.BytesIO(made), object_format=SHA1).iter_unpacked()
    ]
    assert kinds.count(request.param) == 1 and len(kinds) == 6, kinds
    return made


def test_a_pack_git_makes_is_counted_the_same_however_it_is_split(git_pack: bytes) -> None:
    whole = walk(git_pack)
    assert whole.objects == whole.count == 6
    assert whole.inflated > 2 * 20_000 + 6 * PER_OBJECT, whole.inflated  # both files' contents
    for split in range(len(git_pack) + 1):
        assert walk(git_pack, split=split).inflated == whole.inflated, split
    one_byte = PackWalker(64 * MiB)
    for i in range(len(git_pack)):
        one_byte.feed(git_pack[i : i + 1])
    one_byte.finish()
    assert one_byte.inflated == whole.inflated


def test_a_blob_declaring_more_than_the_budget_stops_the_walk_at_its_header() -> None:
    bomb = pack(obj(BLOB, b"a" * 4 * MiB))
    assert len(bomb) < 8_000  # zlib: about a thousand times smaller
    walker = PackWalker(MiB)
    with pytest.raises(InflatedOverBudget) as caught:
        walker.feed(bomb[:16])  # the pack's header and the blob's: nothing inflated yet
    assert caught.value.budget == MiB


@pytest.mark.parametrize("kind", [OFS_DELTA, REF_DELTA])
def test_a_small_delta_declaring_a_large_result_is_counted_its_result(kind: int) -> None:
    base = obj(BLOB, b"x" * 1000)
    delta = varint(1000) + varint(64 * MiB) + b"\x90\x00" * 1024  # copies of the whole base
    ref = b"\x13" if kind == OFS_DELTA else hashlib.sha1(b"blob 1000\0" + b"x" * 1000).digest()
    data = pack(base, obj(kind, delta, ref))
    assert walk(data, budget=128 * MiB).inflated == 1000 + 64 * MiB + 2 * PER_OBJECT
    for split in range(len(data) + 1):
        with pytest.raises(InflatedOverBudget):
            walk(data, budget=MiB, split=split)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"<html>503 Service Unavailable</html>", "does not start as a pack"),
        (pack(header(BLOB, 10) + b"not zlib data at all"), "not zlib"),
        (pack(header(BLOB, 3) + zlib.compress(b"longer than three")), "more than its 3 bytes"),
        (pack(header(BLOB, 30) + zlib.compress(b"shorter")), "inflates to 7 bytes, not its 30"),
        (pack(header(5, 3) + zlib.compress(b"abc")), "type 5"),
        (pack(obj(OFS_DELTA, b"", b"\x01")), "has no sizes"),
        (pack(b"\xff" * 16), "size header does not end"),
    ],
    ids=["html", "not-zlib", "larger", "smaller", "type", "empty-delta", "endless-size"],
)
def test_garbage_is_a_bad_pack_naming_what(data: bytes, says: str) -> None:
    with pytest.raises(BadPack, match=says):
        walk(data)


def test_a_pack_cut_anywhere_is_a_bad_pack(git_pack: bytes) -> None:
    body = len(git_pack) - 20  # the trailer (its checksum) is dulwich's to check
    for cut in range(1, body):
        with pytest.raises(BadPack, match="ends after"):
            walk(git_pack[:cut])


def test_nothing_sent_is_no_pack_and_no_error() -> None:
    assert walk(b"").inflated == 0
