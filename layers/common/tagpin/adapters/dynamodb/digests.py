"""``DIGESTS#<shard>`` / ``STATE``: the digest of every settled tag, one compact item per shard.

Each attribute other than the key is a tag (its name) holding a map: ``d`` (the digest its
``TAG#`` item has) and ``t`` (when the tag moved to it, the item's ``changed_at``). A steady poll
or reconcile reads the ``SHARDS`` items (one BatchGetItem) instead of one item per tag: at 1,000
tags about 35 read units instead of 1,500, at 10,000 about 200 instead of 15,000.

The items are a cache of the ``TAG#`` items and never ahead of them, without transactions:

- every move of a tag (``DynamoTags.record``) leaves a tombstone ``{t: <when it moved>}`` in its
  entry, written only if no later move left one (``t`` only grows);
- ``settle`` writes ``{d, t}`` only if the entry's ``t`` is not later than the ``changed_at`` the
  poll read with the digest: a move that happened after that read has left a later tombstone, so
  an old digest is never cached over a newer move, whichever write lands first;
- the poll drops the entry of a tag the registry failed to answer for (an entry, not a
  tombstone), so that its error is cleared through the tag's item when it answers again.

A write costs the shard item's size (1 write unit per KB: about 4 at 10,000 tags) and happens only
when a tag moves or settles. A poll settles its tags together (``settle_many``): one write per
``SETTLE_PER_WRITE`` entries of one shard, each entry under its own condition, so that settling
10,000 tags costs about 450 writes, not 10,000 (each rewriting the whole shard item). Entries of
tags no longer followed stay (about 130 bytes each, read only).
"""

from __future__ import annotations

from collections.abc import Iterable

from tagpin.adapters.dynamodb.table import DIGESTS, Item, N, S, Table, key
from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import Digest
from tagpin.domain.shards import all_shards, shard

SKIP = frozenset({"pk", "sk"})
NEWER = "attribute_not_exists(#i) OR #i.t <= :t"
# Entries per combined write: each adds 4 operators to the condition (DynamoDB allows 300 in an
# expression) and about 60 characters to the expressions (4 KB each).
SETTLE_PER_WRITE = 25


def digest_key(image: FollowedKey) -> dict[str, dict[str, str]]:
    return key(DIGESTS + shard(image))


def tombstone(table: Table, image: FollowedKey, moved_at: int) -> None:
    """After a move of ``image`` at ``moved_at``: its entry is no longer right (a later move's
    tombstone is kept)."""
    table.update(
        digest_key(image),
        "SET #i = :v",
        condition=NEWER,
        names={"#i": image},
        values={":v": {"M": {"t": N(moved_at)}}, ":t": N(moved_at)},
    )


class DynamoDigests:
    def __init__(self, table: Table) -> None:
        self._table = table

    def all(self, shards: list[str] | None = None) -> dict[str, str]:
        found: dict[str, str] = {}
        keys = [key(DIGESTS + s) for s in shards or all_shards()]
        for item in self._table.batch_get(keys, consistent=False):
            for name in item.keys() - SKIP:
                entry = item[name].get("M", {})
                if "d" in entry:
                    found[name] = entry["d"]["S"]
        return found

    def settle(self, image: FollowedKey, digest: Digest, changed_at: int) -> bool:
        value: Item = {"M": {"d": S(digest), "t": N(changed_at)}}
        return (
            self._table.update(
                digest_key(image),
                "SET #i = :v",
                condition=NEWER,
                names={"#i": image},
                values={":v": value, ":t": N(changed_at)},
            )
            is not None
        )

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
            items = list(group.items())
            for start in range(0, len(items), SETTLE_PER_WRITE):
                part = items[start : start + SETTLE_PER_WRITE]
                if self._settle_together(part):
                    written += len(part)
                else:
                    written += sum(self.settle(image, d, t) for image, (d, t) in part)
        return written

    def _settle_together(self, part: list[tuple[FollowedKey, tuple[Digest, int]]]) -> bool:
        if len(part) == 1:
            image, (digest, changed_at) = part[0]
            return self.settle(image, digest, changed_at)
        names: dict[str, str] = {}
        values: Item = {}
        sets: list[str] = []
        conditions: list[str] = []
        for n, (image, (digest, changed_at)) in enumerate(part):
            names[f"#i{n}"] = image
            values[f":v{n}"] = {"M": {"d": S(digest), "t": N(changed_at)}}
            values[f":t{n}"] = N(changed_at)
            sets.append(f"#i{n} = :v{n}")
            conditions.append(f"(attribute_not_exists(#i{n}) OR #i{n}.t <= :t{n})")
        result = self._table.update(
            digest_key(part[0][0]),
            "SET " + ", ".join(sets),
            condition=" AND ".join(conditions),
            names=names,
            values=values,
        )
        return result is not None

    def drop(self, image: FollowedKey) -> None:
        self._table.update(
            digest_key(image), "REMOVE #i", condition="attribute_exists(#i.d)", names={"#i": image}
        )
