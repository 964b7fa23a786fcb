"""The clusters' state, as the use cases see it (``tagpin.ports.state.State.slots`` and
``.clusters``): the rollouts in progress in each cluster and its last reconcile
(``tagpin.adapters.dynamodb.clusters``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tagpin.domain.refs import Digest


@dataclass(frozen=True)
class ClusterState:
    name: str
    reconciled_at: int
    ok: bool
    error: str | None = None
    workloads: int = 0
    error_at: int | None = None


class Slots(Protocol):
    """``CLUSTER#<name>`` / ``SLOTS``: the rollouts in progress in a cluster."""

    def acquire(
        self, cluster: str, target_id: str, digest: Digest, limit: int, now: int, stale_ms: int
    ) -> bool:
        """Hold one of ``limit`` slots (already held: True); holders older than ``stale_ms`` are
        dropped when full."""
        ...

    def release(self, cluster: str, target_id: str, digest: Digest) -> None:
        """Give the slot back, if ``target_id`` still holds it for ``digest``."""
        ...

    def holders(self, cluster: str) -> dict[str, str]: ...


class Clusters(Protocol):
    """``CLUSTER#<name>`` / ``STATE``: the last reconcile of each cluster."""

    def record(self, name: str, now: int, *, error: str | None = None, workloads: int = 0) -> None: ...

    def get(self, name: str) -> ClusterState | None: ...
