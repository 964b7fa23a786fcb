"""``DIGESTS#<shard>`` / ``STATE``: the digest of every settled tag, one compact item per shard.

Each tag's entry is one string attribute, named ``~`` and the tag: ``<t> <digest>`` (settled: the
digest its ``TAG#`` item has, and ``t``, when the tag moved to it, the item's ``changed_at``) or
``<t>`` alone (a tombstone: the tag moved at ``t``), ``t`` written as ``WIDTH`` digits so that
strings compare as the times do. A steady poll or reconcile reads the ``SHARDS`` items (one
BatchGetItem) instead of one item per tag: at 1,000 tags about 35 read units instead of 1,500, at
10,000 about 200 instead of 15,000.

One scalar per tag, not a map ``{d, t}`` per tag (the layout before, still read): an entry is one
attribute value to encode and decode instead of three (moto and boto3 walk every nested value). At
10,000 tags the read (moto and boto3 in one process) cost 2.9 s of CPU, 1.0 s now; in the poll
bench (a steady poll, load 10-16) moto's CPU fell from 256 to 96 µs a tag. The item's size, and so what a read
costs on AWS, is the same: ``~`` + 13 digits + a separator is what the map's overhead, its two names
and the number were (about 86 bytes beside the tag's name).

The items are a cache of the ``TAG#`` items and never ahead of them, without transactions:

- every move of a tag (``DynamoTags.record``) leaves a tombstone in its entry, written only if no
  later move left one (``t`` only grows);
- ``settle`` writes ``<t> <digest>`` only if the entry's ``t`` is not later than the ``changed_at``
  the poll read with the digest: a move that happened after that read has left a later tombstone,
  so an old digest is never cached over a newer move, whichever write lands first;
- the poll drops the entry of a tag the registry failed to answer for, so that its error is
  cleared through the tag's item when it answers again: the entry becomes a tombstone at its own
  ``t`` (the move it was settled at), so that the next settle of that move lands and an older one
  is still refused.

The layout before (the attribute named by the tag alone, a map ``{d, t}`` or ``{t}``; stacks
deployed before this one have it) is read too, and every condition holds over both: a write checks
the old entry's ``t`` as well and removes it, so that only the new layout remains once a tag moved
or settled; where both exist (an older version still running during a deploy wrote after this one),
the later ``t`` is the tag's entry (a settle over a tombstone of the same ``t``).

A write costs the shard item's size (1 write unit per KB: about 4 at 10,000 tags) and happens only
when a tag moves or settles. A poll settles its tags together (``settle_many``): one write per
``SETTLE_PER_WRITE`` entries of one shard, each entry under its own condition, so that settling
10,000 tags costs about 450 writes, not 10,000 (each rewriting the whole shard item). Entries of
tags no longer followed stay (about 130 bytes each, read only).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tagpin.adapters.dynamodb.table import DIGESTS, Item, N, S, Table, key
from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import Digest
from tagpin.domain.shards import all_shards, shard

SKIP = frozenset({"pk", "sk"})
ENTRY = "~"  # an entry's attribute: ENTRY + the tag (no followed key starts with it)
WIDTH = 13  # digits of an entry's time (epoch ms: until the year 2286)
SEP = " "
# Entries per combined write: each adds 8 operators to the condition (DynamoDB allows 300 in an
# expression) and about 100 characters to the expressions (4 KB each).
SETTLE_PER_WRITE = 25
DROP_TRIES = 3  # a drop's read and tombstone, when a write lands between them each time


def digest_key(image: FollowedKey) -> dict[str, dict[str, str]]:
    return key(DIGESTS + shard(image))


def _at(t: int) -> str:
    if not 0 <= t < 10**WIDTH:
        raise ValueError(f"an entry's time is epoch milliseconds, 0 to {10**WIDTH - 1}; not {t}")
    return f"{t:0{WIDTH}d}"


def _newer(n: str, t: int) -> tuple[str, Item]:
    """The condition that entry ``n``'s (both layouts') time is not later than ``t``, and its values."""
    old = f"(attribute_not_exists(#o{n}) OR #o{n}.t <= :t{n})"
    condition = f"{old} AND (attribute_not_exists(#n{n}) OR #n{n} < :u{n})"
    return condition, {f":t{n}": N(t), f":u{n}": S(_at(t + 1))}


def _write(table: Table, entries: list[tuple[FollowedKey, str, int]]) -> bool:
    """One update of ``(image, value, t)`` entries of one shard, each under its own condition
    (``_newer``); False when one did not hold (nothing written)."""
    names: dict[str, str] = {}
    values: Item = {}
    sets: list[str] = []
    removes: list[str] = []
    conditions: list[str] = []
    for n, (image, value, t) in enumerate(entries):
        names[f"#n{n}"], names[f"#o{n}"] = ENTRY + image, image
        condition, bounds = _newer(str(n), t)
        values[f":v{n}"] = S(value)
        values.update(bounds)
        sets.append(f"#n{n} = :v{n}")
        removes.append(f"#o{n}")
        conditions.append(condition if len(entries) == 1 else f"({condition})")
    result = table.update(
        digest_key(entries[0][0]),
        "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes),
        condition=" AND ".join(conditions),
        names=names,
        values=values,
    )
    return result is not None


def tombstone(table: Table, image: FollowedKey, moved_at: int) -> None:
    """After a move of ``image`` at ``moved_at``: its entry is no longer right (a later move's
    tombstone is kept)."""
    _write(table, [(image, _at(moved_at), moved_at)])


def _old(value: Any) -> tuple[int, str | None]:
    """An entry of the layout before: its time and digest (None: a tombstone)."""
    entry = value.get("M", {}) if isinstance(value, dict) else {}
    t = int(entry.get("t", {}).get("N", 0))
    return t, entry["d"]["S"] if "d" in entry else None


def _entry(item: Item, image: FollowedKey) -> tuple[int, bool]:
    """``image``'s entry in its shard's item: the later ``t`` of both layouts, and whether either
    layout holds a digest."""
    text = item.get(ENTRY + image, {}).get("S", "")
    t_old, digest = _old(item[image]) if image in item else (0, None)
    return max(int(text[:WIDTH] or 0), t_old), len(text) > WIDTH or digest is not None


def _read(item: Item, found: dict[str, str]) -> None:
    """The settled digests of one shard's item into ``found``."""
    old: list[str] = []
    for name, value in item.items():
        if name[:1] == ENTRY:
            text = value.get("S", "")
            if len(text) > WIDTH:
                found[name[1:]] = text[WIDTH + 1 :]
        elif name not in SKIP:
            old.append(name)
    for name in old:  # a store written by the version before (or by it, during a deploy)
        t, digest = _old(item[name])
        new = item.get(ENTRY + name)
        if new is not None:
            text = new.get("S", "")
            if (t, digest is not None) <= (int(text[:WIDTH] or 0), len(text) > WIDTH):
                continue  # the new layout's entry is the later one
            found.pop(name, None)
        if digest is not None:
            found[name] = digest


class DynamoDigests:
    def __init__(self, table: Table) -> None:
        self._table = table

    def all(self, shards: list[str] | None = None) -> dict[str, str]:
        found: dict[str, str] = {}
        keys = [key(DIGESTS + s) for s in shards or all_shards()]
        for item in self._table.batch_get(keys, consistent=False):
            _read(item, found)
        return found

    def settle(self, image: FollowedKey, digest: Digest, changed_at: int) -> bool:
        return _write(self._table, [(image, _at(changed_at) + SEP + digest, changed_at)])

    def settle_many(self, entries: Iterable[tuple[FollowedKey, Digest, int]]) -> int:
        """``settle`` for each ``(image, digest, changed_at)``, written together per shard: one
        update of up to ``SETTLE_PER_WRITE`` entries whose condition is every entry's own. When it
        does not hold (one of its tags moved since it was read), the entries of that update are
        settled one by one, so that only the moved tag is left out. Returns how many were written."""
        by_shard: dict[str, dict[FollowedKey, tuple[Digest, int]]] = {}
        for image, digest, changed_at in entries:
            by_shard.setdefault(shard(image), {})[image] = (digest, changed_at)
        written = 0
        for group in by_shard.values():
            items = [(image, _at(t) + SEP + d, t) for image, (d, t) in group.items()]
            for start in range(0, len(items), SETTLE_PER_WRITE):
                part = items[start : start + SETTLE_PER_WRITE]
                if _write(self._table, part):
                    written += len(part)
                elif len(part) > 1:
                    written += sum(_write(self._table, [entry]) for entry in part)
        return written

    def drop(self, image: FollowedKey) -> None:
        """Forget ``image``'s settled digest: its entry becomes a tombstone at the entry's own
        ``t``, so that a settle read before the move it was settled at is still refused (removing
        the entry let such a settle land again). DynamoDB cannot cut a string in an update, so the
        entry is read first (one strongly consistent read of the shard's item: a read unit per 4 KB
        of it), then one write of the tombstone (a write unit per KB of the item, as the removal
        before) under ``tombstone``'s condition; nothing is written when neither layout holds a
        digest. A write that landed between the read and the tombstone (``t`` only grows) is read
        again, at most ``DROP_TRIES`` times."""
        for _ in range(DROP_TRIES):
            item = self._table.get(digest_key(image)) or {}
            t, held = _entry(item, image)
            if not held:
                return
            if _write(self._table, [(image, _at(t), t)]):
                return
