"""``POLL`` / ``CURSOR``: where the last poll that ran out of time stopped (``image``: the first tag
it did not finish; absent when the run finished every tag), and when (``at``). Poller only."""

from __future__ import annotations

from tagpin.adapters.dynamodb.table import CURSOR, POLL, Item, N, S, Table, key, text


class DynamoPollCursor:
    def __init__(self, table: Table) -> None:
        self._table = table

    def get(self) -> str | None:
        item = self._table.get(key(POLL, CURSOR))
        return None if item is None else text(item, "image")

    def put(self, image: str | None, at: int) -> None:
        # Producers never delete: the item stays, without an image, when the run finished.
        item: Item = {**key(POLL, CURSOR), "at": N(at)}
        if image is not None:
            item["image"] = S(image)
        self._table.put(item)
