"""``<partition>`` / ``<key>``: hints, so that a view lists the few items in a state without reading
every item that could be in it (the holds: ``HOLDS`` / target id; the approvals waiting for a
person: ``AWAITING`` / image).

A hint is never the truth: the item it names is read and decides. So a hint is written *before*
the conditional write that puts its item in the state (a hint without the state is skipped when
read; the state without its hint could not be listed), and only a reader retires one: a hint
whose item is not in the state and that is older than ``GRACE_MS`` (so never one whose state
write may still be on its way) is set to expire (``expires_at``, the table's TTL), on the
condition that it was not written again since it was read. Nothing else retires hints, so no
writer's clock can retire another's hint. Hints set to expire are not read again. Only
``PutItem``/``UpdateItem``/``Query``: the functions that write hints have no ``DeleteItem``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tagpin.adapters.dynamodb.table import N, Table, key, number, text

# Longer than a function's longest invocation (Lambda's limit is 15 minutes): a hint younger than
# this may be ahead of the state write that follows it.
GRACE_MS = 20 * 60 * 1000


@dataclass(frozen=True)
class Hint:
    key: str
    noted_at: int


class Hints:
    def __init__(self, table: Table, partition: str) -> None:
        self._table = table
        self._partition = partition

    def note(self, item: str, now: int) -> None:
        """``item`` is about to enter the state (write before the state's own conditional write);
        a hint set to expire is live again."""
        self._table.put({**key(self._partition, item), "noted_at": N(now)})

    def read(self, limit: int) -> list[Hint]:
        """The first ``limit`` live hints in key order."""
        return [
            Hint(text(item, "sk") or "", number(item, "noted_at") or 0)
            for item in self._table.query(
                self._partition, limit=limit, filter="attribute_not_exists(expires_at)"
            )
        ]

    def prune(self, hints: list[Hint], kept: set[str], now: int) -> None:
        """Retire the hints read whose item is not in the state (``kept`` are), once past the
        grace period and unless written again since they were read."""
        for hint in hints:
            if hint.key in kept or hint.noted_at > now - GRACE_MS:
                continue
            self._table.update(
                key(self._partition, hint.key),
                "SET expires_at = :e",
                condition="noted_at = :seen",
                values={":e": N(now // 1000), ":seen": N(hint.noted_at)},
            )
