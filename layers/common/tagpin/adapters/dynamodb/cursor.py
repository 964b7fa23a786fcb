"""``POLL`` / ``CURSOR`` (a poll in parts: ``CURSOR#<i>of<n>``, one per part): where the last poll
that ran out of time stopped (``image``: the first tag it did not finish; absent when the run
finished every tag), and when (``at``). Poller only."""

from __future__ import annotations

from tagpin.adapters.dynamodb.table import CURSOR, POLL, Item, N, S, Table, key, text
from tagpin.domain.channels import FollowedKey
from tagpin.domain.shards import WHOLE, PollPart


def cursor_key(part: PollPart) -> dict[str, dict[str, str]]:
    return key(POLL, CURSOR if part.whole else f"{CURSOR}#{part.name}")


class DynamoPollCursor:
    def __init__(self, table: Table) -> None:
        self._table = table

    def get(self, part: PollPart = WHOLE) -> str | None:
        item = self._table.get(cursor_key(part))
        return None if item is None else text(item, "image")

    def put(self, image: FollowedKey | None, at: int, part: PollPart = WHOLE) -> None:
        # Producers never delete: the item stays, without an image, when the run finished.
        item: Item = {**cursor_key(part), "at": N(at)}
        if image is not None:
            item["image"] = S(image)
        self._table.put(item)
