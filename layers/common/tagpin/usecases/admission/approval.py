"""A person approves before a digest starts a wave (``rollout.waves[].approval``) or any wave of
an image (``images[].approval``): a target of such a wave waits until its wave is approved for this
digest. The request itself (asked once, announced, lapsing) is ``tagpin.usecases.approvals``'."""

from __future__ import annotations

from tagpin.domain.config import FollowedImage, Target
from tagpin.domain.moves import Move
from tagpin.ports.state import PromotionStatus
from tagpin.usecases.admission.decision import Decision, GateName, Known, Stage
from tagpin.usecases.waves import PlannedWave


def needs_approval(followed: FollowedImage | None, wave: PlannedWave) -> bool:
    return bool(wave.targets) and (
        (followed is not None and followed.approval) or (wave.wave is not None and wave.wave.approval)
    )


class ApprovalGate:
    name = GateName.APPROVAL
    stage = Stage.TARGET

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        wave = known.wave
        if wave is None or not needs_approval(known.followed, wave):
            return Decision.go(self.name)
        promotion = known.promotion
        if promotion is not None and promotion.digest == move.digest:
            if promotion.status is PromotionStatus.COMPLETE:  # healing: every wave went through
                return Decision.go(self.name)
            if promotion.status is PromotionStatus.ROLLING and wave.index < promotion.wave:
                return Decision.go(self.name)  # a wave the promotion has passed
            if wave.index in promotion.approved_waves:
                return Decision.go(self.name)
        # not started (or another digest's): a new promotion asks when it reaches the wave
        return Decision.await_approval(f"wave {wave.name} waits for approval")
