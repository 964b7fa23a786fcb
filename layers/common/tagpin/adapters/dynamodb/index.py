"""``FOLLOW#<shard>`` / ``<registry/repo:tag>#<target id>``: the index of label-discovered targets.

Attributes: ``image``, ``target_id``, ``cluster``, ``namespace``, ``kind``, ``name``,
``container``, ``seen_at``. Written by the reconciler (what it found by label); read by the
poller, the webhook and the consumer (``tagpin.usecases.followed``). A tag's entries are in its
shard's partition (``tagpin.domain.shards``): one tag's targets are a ``begins_with`` Query of one
partition whose size does not grow with the number of tags followed elsewhere (the consumer's
lookup); the whole index is one paged Query per shard, run side by side.

Upgrading from the one-partition index (``FOLLOW``): the first reconcile after the upgrade
writes every entry again under its shard; until it runs (at most one reconcile interval)
label-discovered targets are not seen by the poller, the webhook and the consumer. The old
partition's items are left as they are (a few hundred bytes each, read by nothing).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tagpin.adapters.dynamodb.table import FOLLOW, Item, N, S, Table, key, number, text
from tagpin.domain.channels import SEPARATOR
from tagpin.domain.shards import all_shards, shard
from tagpin.ports.state import IndexEntry


def index_entry(item: Item) -> IndexEntry:
    return IndexEntry(
        image=text(item, "image") or "",
        target_id=text(item, "target_id") or "",
        cluster=text(item, "cluster") or "",
        namespace=text(item, "namespace") or "",
        kind=text(item, "kind") or "",
        name=text(item, "name") or "",
        container=text(item, "container") or "",
        seen_at=number(item, "seen_at") or 0,
    )


def entry_key(e: IndexEntry) -> dict[str, dict[str, str]]:
    return key(FOLLOW + shard(e.image), f"{e.image}#{e.target_id}")


READERS = 8  # shards queried side by side when the whole index is read


class DynamoIndex:
    def __init__(self, table: Table) -> None:
        self._table = table

    def entries(self, image: str | None = None, shards: list[str] | None = None) -> list[IndexEntry]:
        if image is not None:
            return [index_entry(i) for i in self._table.query(FOLLOW + shard(image), prefix=image + "#")]
        with ThreadPoolExecutor(max_workers=READERS) as pool:
            pages = list(pool.map(lambda s: self._table.query(FOLLOW + s), shards or all_shards()))
        return [index_entry(item) for page in pages for item in page]

    def page(
        self, shard_name: str, limit: int, after: str | None = None
    ) -> tuple[list[IndexEntry], str | None]:
        items, last = self._table.query_page(FOLLOW + shard_name, limit, after)
        return [index_entry(i) for i in items], last

    def channel_entries(self, repository: str) -> list[IndexEntry]:
        prefix = repository + SEPARATOR
        return [index_entry(i) for i in self._table.query(FOLLOW + shard(repository), prefix=prefix)]

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
