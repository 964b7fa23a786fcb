"""``<partition>`` / ``<key>``: hints, so that a view lists the few items in a state without reading
every item that could be in it (the holds: ``HOLDS`` / target id; the approvals waiting for a
person: ``AWAITING`` / image).

A hint is never the truth: the item it names is read and decides. So a hint is written *before*
the conditional write that puts its item in the state (a hint without the state is skipped when
read; the state without its hint could not be listed), and once the item has left the state it is
set to expire (``expires_at``, the table's TTL): by the write that ends the state, or by the next
read that finds it stale. Only ``PutItem`` and ``UpdateItem``: the functions that write hints have
no ``DeleteItem``. A hint written again (the state entered again) no longer expires.
"""

from __future__ import annotations

from dataclasses import dataclass

from tagpin.adapters.dynamodb.table import N, Table, key, number, text


@dataclass(frozen=True)
class Hint:
    key: str
    expiring: bool


class Hints:
    def __init__(self, table: Table, partition: str) -> None:
        self._table = table
        self._partition = partition

    def note(self, item: str, now: int) -> None:
        """``item`` is about to enter the state (write before the state's own conditional write)."""
        self._table.put({**key(self._partition, item), "noted_at": N(now)})

    def forget(self, item: str, now: int) -> None:
        """``item`` left the state: its hint expires, unless it was noted again after ``now``."""
        self._table.update(
            key(self._partition, item),
            "SET expires_at = :e",
            condition="noted_at <= :now",
            values={":e": N(now // 1000), ":now": N(now)},
        )

    def read(self, limit: int) -> list[Hint]:
        """The first ``limit`` hints in key order."""
        return [
            Hint(text(item, "sk") or "", number(item, "expires_at") is not None)
            for item in self._table.query(self._partition, limit=limit)
        ]

    def prune(self, hints: list[Hint], kept: set[str], now: int) -> None:
        """Let the hints read whose item is not in the state (``kept`` are) expire."""
        for hint in hints:
            if hint.key not in kept and not hint.expiring:
                self.forget(hint.key, now)
