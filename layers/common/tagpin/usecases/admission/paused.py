"""The workload asks to be left alone (annotated ``tagpin.dev/paused``): not patched; applied once
the annotation is removed."""

from __future__ import annotations

from tagpin.domain.annotations import ANNOTATION_PAUSED
from tagpin.domain.config import Target
from tagpin.domain.moves import Move
from tagpin.usecases.admission.decision import Decision, GateName, Known, Stage
from tagpin.usecases.admission.hold import NOT_READ


class PausedGate:
    name = GateName.PAUSED
    stage = Stage.WORKLOAD

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        if known.workload is None:
            return Decision.unknown(self.name, NOT_READ)
        if known.workload.paused:
            return Decision.block(self.name, f"annotated {ANNOTATION_PAUSED}")
        return Decision.go(self.name)
