"""The digest is marked bad for the tag (a rollout of it failed and was rolled back, or a person
rejected it), or its promotion was halted (the same, or an approval request lapsed): nothing of it
is applied until the tag moves (or ``tagpin clear``)."""

from __future__ import annotations

from tagpin.domain.moves import Move
from tagpin.ports.state import PromotionStatus
from tagpin.usecases.admission.decision import Decision, GateName, Known


class BadDigestGate:
    name = GateName.BAD_DIGEST

    def decide(self, move: Move, known: Known, now: int) -> Decision:
        tag = known.tag
        if tag is not None and tag.blocked and tag.digest == move.digest:
            return Decision.block(self.name, tag.bad_reason or "")
        promotion = known.promotion  # the live path learns this one from the promotion's start
        if (
            promotion is not None
            and promotion.digest == move.digest
            and promotion.status is PromotionStatus.HALTED
        ):
            return Decision.block(self.name, promotion.detail or "")
        return Decision.go(self.name)
