"""A target's wave is reached (``rollout.waves``): a promotion starts at the first wave and moves
to the next once the one before is verified and has soaked (``tagpin.usecases.promote``), perhaps
approved first. A target of a later wave waits: it is not touched now, and the promotion sends the
change again when its wave starts. A complete promotion heals every wave. Pure: the promotion, the
plan and the configuration's soak."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from tagpin.domain.config import RolloutSettings, Target
from tagpin.domain.moves import Move
from tagpin.ports.state import Promotion, PromotionStatus
from tagpin.usecases.admission.decision import Decision, GateName, Known, Stage
from tagpin.usecases.waves import PlannedWave


def reached(move: Move, promotion: Promotion | None) -> int | None:
    """The last wave index the move may touch now; None: every wave (its promotion is complete).
    A promotion of this digest that is rolling stands at its wave; any other (none yet, another
    digest's, a dry run's, a halted one) means a new promotion, which starts at the first."""
    if promotion is None or promotion.digest != move.digest:
        return 0
    if promotion.status is PromotionStatus.COMPLETE:
        return None
    return promotion.wave if promotion.status is PromotionStatus.ROLLING else 0


class WaveGate:
    name = GateName.WAVE
    stage = Stage.WAVE

    def __init__(self, settings: Callable[[], RolloutSettings]) -> None:
        self._settings = settings

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        wave = known.wave
        last = reached(move, known.promotion)
        if wave is None or last is None or wave.index <= last:
            return Decision.go(self.name)
        return Decision.wait(f"wave {wave.name} waits for {self._waiting_for(move, known, last)}")

    def _waiting_for(self, move: Move, known: Known, last: int) -> str:
        """Which wave the promotion stands at, and what that wave waits for."""
        waves = known.waves
        # a stored index past the plan (waves removed since) is the last; an empty wave is passed
        at: PlannedWave | None = next((w for w in waves[last:] if w.targets), None)
        if at is None:
            at = waves[min(last, len(waves) - 1)] if waves else None
        name = f"wave {at.name}" if at is not None else f"wave {last + 1}"
        promotion = known.promotion
        if (
            promotion is None
            or promotion.digest != move.digest
            or promotion.status is not PromotionStatus.ROLLING
        ):
            return f"{name}, where its promotion starts"
        if promotion.awaiting_approval:
            return f"{name}, which awaits a person's approval"
        if promotion.wave_verified_at is None:
            return f"{name} to be verified"
        soak_s = self._settings().soak_after(at.wave if at is not None else None)
        ends = datetime.fromtimestamp((promotion.wave_verified_at + soak_s * 1000) / 1000, UTC)
        return f"{name} to soak (until {ends:%Y-%m-%dT%H:%M:%SZ})"
