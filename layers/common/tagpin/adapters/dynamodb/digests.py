"""``DIGESTS#<shard>`` / ``STATE``: the digest of every settled tag, one compact item per shard.

Each attribute other than the key is a tag (its name) holding the digest its ``TAG#`` item has
(``S``). A steady poll or reconcile reads the ``SHARDS`` items (one BatchGetItem) instead of one
item per tag: at 1,000 tags about 35 read units instead of 1,500, at 10,000 about 200 instead of
15,000.

The items are a cache of the ``TAG#`` items and never ahead of them:

- an entry is written (``settle``) in one transaction with a condition on the tag's item (still
  that digest, no error), so a tag that moved meanwhile is never cached at its old digest;
- ``DynamoTags.record`` drops the entry after every move of the tag (after its own write), so
  whatever order the two writers take, the entry is gone or right;
- the poll drops the entry of a tag the registry failed to answer for (so that its error is
  cleared through the tag's item when it answers again).

A write costs the shard item's size (1 write unit per KB: about 4 at 10,000 tags), and happens
only when a tag moves or is first seen. Entries of tags no longer followed stay until the tag
moves (they cost reads only: about 130 bytes each).
"""

from __future__ import annotations

from tagpin.adapters.dynamodb.table import DIGESTS, TAG, Item, S, Table, key, text
from tagpin.domain.shards import all_shards, shard

SKIP = frozenset({"pk", "sk"})


def digest_key(image: str) -> dict[str, dict[str, str]]:
    return key(DIGESTS + shard(image))


class DynamoDigests:
    def __init__(self, table: Table) -> None:
        self._table = table

    def all(self, shards: list[str] | None = None) -> dict[str, str]:
        found: dict[str, str] = {}
        keys = [key(DIGESTS + s) for s in shards or all_shards()]
        for item in self._table.batch_get(keys, consistent=False):
            found.update({name: text(item, name) or "" for name in item.keys() - SKIP})
        return found

    def settle(self, image: str, digest: str) -> bool:
        names = {"#i": image}
        values: Item = {":d": S(digest)}
        return self._table.transact(
            [
                {
                    "ConditionCheck": {
                        "TableName": self._table.name,
                        "Key": key(TAG + image),
                        "ConditionExpression": "digest = :d AND attribute_not_exists(last_error)",
                        "ExpressionAttributeValues": values,
                    }
                },
                {
                    "Update": {
                        "TableName": self._table.name,
                        "Key": digest_key(image),
                        "UpdateExpression": "SET #i = :d",
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": values,
                    }
                },
            ]
        )

    def drop(self, image: str) -> None:
        self._table.update(digest_key(image), "REMOVE #i", names={"#i": image})
