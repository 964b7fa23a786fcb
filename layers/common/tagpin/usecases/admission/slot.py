"""The cluster slot (``rollout.max_concurrent_per_cluster``): at most that many rollouts in progress
in one cluster. The live path takes a slot to go (a conditional write; released once the rollout
is verified, failed or superseded: ``release_slot``); explain only counts the holders. A target
that finds its cluster full is deferred and tried again after ``verify_interval_seconds``."""

from __future__ import annotations

from collections.abc import Callable

from tagpin.domain.config import RolloutSettings, Target
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest
from tagpin.ports.state import State
from tagpin.usecases.admission.decision import Decision, GateName, Known, Stage


def stale_after_ms(settings: RolloutSettings) -> int:
    """A holder older than this lost its rollout (its verification never came): dropped when full."""
    return (settings.verify_timeout_seconds + 2 * settings.verify_interval_seconds + 600) * 1000


def release_slot(state: State, settings: RolloutSettings, target: Target, digest: Digest) -> None:
    """Give the target's slot back (when there is a limit)."""
    if settings.max_concurrent_per_cluster:
        state.slots.release(target.cluster, target.id, digest)


class SlotGate:
    name = GateName.SLOT
    stage = Stage.TARGET

    def __init__(self, state: State, settings: Callable[[], RolloutSettings]) -> None:
        self._state = state
        self._settings = settings

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        settings = self._settings()
        limit = settings.max_concurrent_per_cluster
        if not limit:
            return Decision.go(self.name)
        slots = self._state.slots
        if known.live:
            taken = slots.acquire(
                target.cluster, target.id, move.digest, limit, now, stale_after_ms(settings)
            )
        else:
            holders = slots.holders(target.cluster)
            taken = target.id in holders or len(holders) < limit
        if taken:
            return Decision.go(self.name)
        return Decision.defer(
            self.name,
            settings.verify_interval_seconds,
            f"cluster {target.cluster} has {limit} rollouts in progress (max_concurrent_per_cluster)",
        )
