"""``FOLLOW`` / ``<registry/repo:tag>#<target id>``: the index of label-discovered targets.

Attributes: ``image``, ``target_id``, ``cluster``, ``namespace``, ``kind``, ``name``,
``container``, ``seen_at``. Written by the reconciler (what it found by label); read by the
poller, the webhook and the consumer (``tagpin.usecases.followed``). One partition: the whole
index is one paged Query, one tag's targets a ``begins_with`` Query.
"""

from __future__ import annotations

from tagpin.adapters.dynamodb.table import FOLLOW, Item, N, S, Table, key, number, text
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


class DynamoIndex:
    def __init__(self, table: Table) -> None:
        self._table = table

    def entries(self, image: str | None = None) -> list[IndexEntry]:
        prefix = None if image is None else image + "#"
        return [index_entry(item) for item in self._table.query(FOLLOW, prefix=prefix)]

    def update(self, put: list[IndexEntry], delete: list[IndexEntry]) -> None:
        requests: list[Item] = [
            {"DeleteRequest": {"Key": key(FOLLOW, f"{e.image}#{e.target_id}")}} for e in delete
        ]
        for e in put:
            item: Item = {
                **key(FOLLOW, f"{e.image}#{e.target_id}"),
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
