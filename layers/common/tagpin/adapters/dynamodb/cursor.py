"""``POLL`` / ``CURSOR`` (a poll in parts: ``CURSOR#<i>of<n>``, one per part): where the last poll
that ran out of time stopped (``image``: the first tag it did not finish; absent when the run
finished every tag), when (``at``), and since when the pass it continued has gone on (``since``,
``tagpin.domain.poll_pass``; a cursor written before ``since`` was kept counts from its ``at``).
Poller only."""

from __future__ import annotations

from tagpin.adapters.dynamodb.table import CURSOR, POLL, Item, N, S, Table, key, number, text
from tagpin.domain.channels import FollowedKey
from tagpin.domain.poll_pass import PollPass
from tagpin.domain.shards import WHOLE, PollPart


def cursor_key(part: PollPart) -> dict[str, dict[str, str]]:
    return key(POLL, CURSOR if part.whole else f"{CURSOR}#{part.name}")


class DynamoPollCursor:
    def __init__(self, table: Table) -> None:
        self._table = table

    def get(self, part: PollPart = WHOLE) -> PollPass:
        item = self._table.get(cursor_key(part))
        image = None if item is None else text(item, "image")
        if item is None or image is None:
            return PollPass()
        since = number(item, "since")
        return PollPass(FollowedKey(image), number(item, "at") if since is None else since)

    def put(self, position: PollPass, at: int, part: PollPart = WHOLE) -> None:
        # Producers never delete: the item stays, without an image, when the run finished.
        item: Item = {**cursor_key(part), "at": N(at)}
        if position.cursor is not None:
            item["image"] = S(position.cursor)
            if position.since is not None:
                item["since"] = N(position.since)
        self._table.put(item)
