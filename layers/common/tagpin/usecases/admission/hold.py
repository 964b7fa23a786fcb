"""A person stepped in: the target is held where it is. Two sources, one gate name:

- a stored hold (``HoldGate``, asked before the target is claimed): ``tagpin hold`` or the
  console's Hold (until released, or until a time), or tagpin's own after a person changed the
  workload (until the tag moves);
- the workload's ``tagpin.dev/hold`` annotation (``HoldAnnotationGate``, asked on the workload
  as the patch step reads it): the annotation decides each time, nothing is stored.
"""

from __future__ import annotations

from tagpin.domain.annotations import ANNOTATION_HOLD
from tagpin.domain.config import Target
from tagpin.domain.moves import Move
from tagpin.usecases.admission.decision import Decision, GateName, Known, Stage

NOT_READ = "the workload is not read here"


class HoldGate:
    name = GateName.HOLD
    stage = Stage.TARGET

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        state = known.state
        if state is not None and state.holds(move.digest, now):
            return Decision.block(self.name, state.detail or "")
        return Decision.go(self.name)


class HoldAnnotationGate:
    name = GateName.HOLD
    stage = Stage.WORKLOAD

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        if known.workload is None:
            return Decision.unknown(self.name, NOT_READ)
        if known.workload.held:
            return Decision.block(self.name, f"annotated {ANNOTATION_HOLD}: held where it is")
        return Decision.go(self.name)
