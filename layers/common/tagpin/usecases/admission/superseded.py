"""The move is superseded: a newer digest of the tag was seen (the tag's state), or holds the
image's promotion. Nothing of an older move is applied, whichever path brings it."""

from __future__ import annotations

from tagpin.domain.moves import Move
from tagpin.usecases.admission.decision import Decision, GateName, Known


class SupersededGate:
    name = GateName.SUPERSEDED

    def decide(self, move: Move, known: Known, now: int) -> Decision:
        tag = known.tag
        if tag is not None and tag.digest != move.digest and tag.observed_at > move.observed_at:
            return Decision.block(self.name, f"current: {tag.digest}")
        promotion = known.promotion  # the live path learns this one from the promotion's start
        if (
            promotion is not None
            and promotion.digest != move.digest
            and promotion.observed_at >= move.observed_at
        ):
            return Decision.block(self.name, f"current: {promotion.digest}")
        return Decision.go(self.name)
