"""Items of ``CLUSTER#<name>``: ``STATE``, the last reconcile of a cluster (``reconciled_at``,
``ok``, ``workloads``, ``last_error``, ``error_at``; written by the reconciler), and ``SLOTS``, the
rollouts in progress in it (``holders``: target id -> {digest, at}; taken by the consumer,
released by the consumer or the verifier) for ``rollout.max_concurrent_per_cluster``.
"""

from __future__ import annotations

from tagpin.adapters.dynamodb.table import CLUSTER, SLOTS, TEXT_LIMIT, N, S, Table, key, number, text
from tagpin.domain.refs import Digest
from tagpin.ports.state import ClusterState


class DynamoClusters:
    def __init__(self, table: Table) -> None:
        self._table = table

    def record(self, name: str, now: int, *, error: str | None = None, workloads: int = 0) -> None:
        if error is None:
            self._table.update(
                key(CLUSTER + name),
                "SET reconciled_at = :now, ok = :ok, workloads = :w REMOVE last_error",
                values={":now": N(now), ":ok": {"BOOL": True}, ":w": N(workloads)},
            )
            return
        self._table.update(
            key(CLUSTER + name),
            "SET reconciled_at = :now, ok = :ok, last_error = :e, error_at = :now",
            values={":now": N(now), ":ok": {"BOOL": False}, ":e": S(error, TEXT_LIMIT)},
        )

    def get(self, name: str) -> ClusterState | None:
        item = self._table.get(key(CLUSTER + name))
        if item is None:
            return None
        return ClusterState(
            name=name,
            reconciled_at=number(item, "reconciled_at") or 0,
            ok=bool(item.get("ok", {}).get("BOOL")),
            error=text(item, "last_error"),
            workloads=number(item, "workloads") or 0,
            error_at=number(item, "error_at"),
        )


class DynamoSlots:
    def __init__(self, table: Table) -> None:
        self._table = table

    def acquire(
        self, cluster: str, target_id: str, digest: Digest, limit: int, now: int, stale_ms: int
    ) -> bool:
        item_key = key(CLUSTER + cluster, SLOTS)
        holder = {"M": {"digest": S(digest), "at": N(now)}}
        for attempt in range(2):
            self._table.update(
                item_key, "SET holders = if_not_exists(holders, :empty)", values={":empty": {"M": {}}}
            )
            if (
                self._table.update(
                    item_key,
                    "SET holders.#t = :h",
                    condition="attribute_exists(holders.#t) OR size(holders) < :max",
                    names={"#t": target_id},
                    values={":h": holder, ":max": N(limit)},
                )
                is not None
            ):
                return True
            if attempt == 0 and not self._drop_stale(cluster, now - stale_ms):
                return False
        return False

    def _drop_stale(self, cluster: str, before: int) -> bool:
        holders = self._holders(cluster)
        stale = [t for t, h in holders.items() if int(h["M"]["at"]["N"]) < before]
        for target_id in stale:
            self.release(cluster, target_id, Digest(holders[target_id]["M"]["digest"]["S"]))
        return bool(stale)

    def release(self, cluster: str, target_id: str, digest: Digest) -> None:
        self._table.update(
            key(CLUSTER + cluster, SLOTS),
            "REMOVE holders.#t",
            condition="holders.#t.digest = :d",
            names={"#t": target_id},
            values={":d": S(digest)},
        )

    def _holders(self, cluster: str) -> dict[str, dict[str, dict[str, dict[str, str]]]]:
        item = self._table.get(key(CLUSTER + cluster, SLOTS)) or {}
        holders: dict[str, dict[str, dict[str, dict[str, str]]]] = item.get("holders", {}).get("M", {})
        return holders

    def holders(self, cluster: str) -> dict[str, str]:
        return {t: h["M"]["digest"]["S"] for t, h in self._holders(cluster).items()}
