"""``FOLLOW#<shard>`` / ``<registry/repo:tag>#<target id>``: the index of label-discovered targets.

Attributes: ``image``, ``target_id``, ``cluster``, ``namespace``, ``kind``, ``name``,
``container``, ``seen_at``. Written by the reconciler (what it found by label); read by the
poller, the webhook and the consumer (``tagpin.usecases.followed``). A tag's entries are in its
shard's partition (``tagpin.domain.shards``): one tag's targets are a ``begins_with`` Query of one
partition whose size does not grow with the number of tags followed elsewhere (the consumer's
lookup); the whole index is one paged Query per shard, run side by side.

Looked up by key, never by reading the index: a target's entries by its id (the table's global
secondary index ``ByTarget`` on ``target_id``: one Query), an entry by its tag and target id (its
key), and the tags of a shard with their targets per cluster (``IMAGES#<shard>`` / ``STATE``: one
item per shard, ``images`` = {tag: {cluster: targets}}, and ``version``). That item is written after
every change of its shard (``update``), and by the first reader that finds none (an index written
before it existed): each time from a consistent read of the shard made after reading the item,
on the condition that the item's ``version`` did not change meanwhile (else read and written
again), so a write always reflects every entry written before it.

Upgrading from the one-partition index (``FOLLOW``): the first reconcile after the upgrade
writes every entry again under its shard; until it runs (at most one reconcile interval)
label-discovered targets are not seen by the poller, the webhook and the consumer. The old
partition's items are left as they are (a few hundred bytes each, read by nothing).
"""

from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from tagpin.adapters.dynamodb.table import (
    BY_TARGET,
    FOLLOW,
    IMAGES,
    Item,
    N,
    S,
    Table,
    followed_key,
    key,
    number,
    text,
)
from tagpin.domain.channels import SEPARATOR, FollowedKey
from tagpin.domain.shards import all_shards, shard
from tagpin.ports.index import IndexEntry, ShardImages

log = logging.getLogger(__name__)


def index_entry(item: Item) -> IndexEntry:
    return IndexEntry(
        image=followed_key(item),
        target_id=text(item, "target_id") or "",
        cluster=text(item, "cluster") or "",
        namespace=text(item, "namespace") or "",
        kind=text(item, "kind") or "",
        name=text(item, "name") or "",
        container=text(item, "container") or "",
        seen_at=number(item, "seen_at") or 0,
    )


def _paged_entry(item: Item) -> IndexEntry:
    """An entry from its tag and target id (``PAGE_ATTRIBUTES``); an id of fewer than five parts
    gives empty parts, which no target has (``merge`` leaves the entry out, as it leaves out an
    entry whose parts do not make its id)."""
    target_id = text(item, "target_id") or ""
    parts = target_id.rsplit("/", 4)
    cluster, namespace, kind, name, container = parts if len(parts) == 5 else ["", "", "", "", ""]
    return IndexEntry(followed_key(item), target_id, cluster, namespace, kind, name, container)


def entry_key(e: IndexEntry) -> dict[str, dict[str, str]]:
    return key(FOLLOW + shard(e.image), f"{e.image}#{e.target_id}")


READERS = 8  # shards queried side by side when the whole index is read
# What a page of entries (the console's pages of targets) and one tag's entries read: the tag and
# the target's id, whose five parts are the entry's cluster, namespace, kind, name and container
# (``Target.id``; only the cluster may hold a "/"); not the keys, nor ``seen_at``. Every attribute
# read costs DynamoDB's response and the function's parsing: two instead of seven (or eight).
PAGE_ATTRIBUTES = ["image", "target_id"]
SUMMARY_ATTEMPTS = 5  # a shard's item written again after another writer's (a concurrent update)


class DynamoIndex:
    def __init__(self, table: Table) -> None:
        self._table = table

    def entries(self, image: FollowedKey | None = None, shards: list[str] | None = None) -> list[IndexEntry]:
        if image is not None:  # one tag's: its targets (an image's page, a change's lookup)
            items = self._table.query(FOLLOW + shard(image), prefix=image + "#", attributes=PAGE_ATTRIBUTES)
            return [_paged_entry(i) for i in items]
        with ThreadPoolExecutor(max_workers=READERS) as pool:
            pages = list(pool.map(lambda s: self._table.query(FOLLOW + s), shards or all_shards()))
        return [index_entry(item) for page in pages for item in page]

    def page(
        self, shard_name: str, limit: int, after: str | None = None
    ) -> tuple[list[IndexEntry], str | None]:
        items, last = self._table.query_page(FOLLOW + shard_name, limit, after, attributes=PAGE_ATTRIBUTES)
        return [_paged_entry(i) for i in items], last

    def channel_entries(self, repository: str) -> list[IndexEntry]:
        prefix = repository + SEPARATOR
        return [index_entry(i) for i in self._table.query(FOLLOW + shard(repository), prefix=prefix)]

    def of_target(self, target_id: str) -> list[IndexEntry]:
        """The entries of one target, by its id: one Query of the ``ByTarget`` index."""
        return [index_entry(i) for i in self._table.query_index(BY_TARGET, "target_id", target_id)]

    def get_many(self, keys: list[tuple[FollowedKey, str]]) -> list[IndexEntry]:
        """The entries of these (tag, target id), those that exist: one batched read of their keys."""
        wanted = [entry_key(IndexEntry(image, target_id, "", "", "", "", "")) for image, target_id in keys]
        return [index_entry(i) for i in self._table.batch_get(list(_unique(wanted)), consistent=False)]

    def images(self, shards: list[str]) -> dict[str, ShardImages]:
        """The tags of each of ``shards`` with their targets per cluster: one batched read (a shard
        without its item yet is summarised, once, from its entries)."""
        found = {
            (text(item, "pk") or "").removeprefix(IMAGES): _decode(item)
            for item in self._table.batch_get([key(IMAGES + s) for s in shards], consistent=False)
        }
        return {s: found[s] if s in found else self._summarise(s) for s in shards}

    def _summarise(self, shard_name: str) -> ShardImages:
        """Write the shard's item from a consistent read of its entries, made after reading the
        item, unless another writer wrote it meanwhile (then again)."""
        item_key = key(IMAGES + shard_name)
        images: ShardImages = {}
        for _ in range(SUMMARY_ATTEMPTS):
            current = self._table.get(item_key, consistent=True)
            version = number(current, "version") if current else None
            counts = Counter(
                (followed_key(i), text(i, "cluster") or "")
                for i in self._table.query(
                    FOLLOW + shard_name, attributes=["image", "cluster"], consistent=True
                )
            )
            images = {}
            for (image, cluster), targets in counts.items():
                images.setdefault(image, {})[cluster] = targets
            encoded = {
                image: {"M": {c: N(n) for c, n in clusters.items()}} for image, clusters in images.items()
            }
            item = {**item_key, "images": {"M": encoded}, "version": N((version or 0) + 1)}
            if version is None:
                written = self._table.put(item, condition="attribute_not_exists(pk)")
            else:
                written = self._table.put(item, condition="version = :v", values={":v": N(version)})
            if written:
                return images
        log.warning("shard summary not written: other writers kept writing it", extra={"shard": shard_name})
        return images

    def update(self, put: list[IndexEntry], delete: list[IndexEntry]) -> None:
        requests: list[Item] = [{"DeleteRequest": {"Key": entry_key(e)}} for e in delete]
        for e in put:
            item: Item = {
                **entry_key(e),
                "image": S(e.image),
                "target_id": S(e.target_id),
                "cluster": S(e.cluster),
                "namespace": S(e.namespace),
                "kind": S(e.kind),
                "name": S(e.name),
                "container": S(e.container),
                "seen_at": N(e.seen_at),
            }
            requests.append({"PutRequest": {"Item": item}})
        self._table.batch_write(requests)
        for changed in sorted({shard(e.image) for e in [*put, *delete]}):
            self._summarise(changed)


def _decode(item: Item) -> ShardImages:
    images = (item.get("images") or {}).get("M", {})
    return {
        FollowedKey(image): {c: int(n["N"]) for c, n in value.get("M", {}).items()}
        for image, value in images.items()
    }


def _unique(keys: list[Item]) -> list[Item]:
    """``keys`` without repeats (BatchGetItem refuses a request that names one key twice)."""
    seen: dict[str, Item] = {}
    for k in keys:
        seen.setdefault(k["pk"]["S"] + "\0" + k["sk"]["S"], k)
    return list(seen.values())
