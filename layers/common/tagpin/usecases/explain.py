"""Would this move roll on this target now, and why not? One answer for the dry run
(``rollout.dry_run``), ``tagpin plan`` and the console: admission's ``explain`` (every gate's
decision, nothing changed) on the target's workload as read, and what it would be patched to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tagpin.domain.config import Target
from tagpin.domain.moves import Move
from tagpin.ports.workloads import WorkloadError, Workloads
from tagpin.usecases.admission import Admission, Decision, GateName, Known, Verdict, first_stop
from tagpin.usecases.patch import pinned_image


@dataclass(frozen=True)
class TargetPlan:
    """A target's answer: every gate's decision, the first that stops the move (else go), and what
    its container runs and would run."""

    target: Target
    decisions: tuple[Decision, ...]
    decision: Decision  # the first stop (an unknown one included), else go with the warnings
    current: str | None = None  # what the container runs (None: not read, or no such container)
    desired: str | None = None  # what it would be patched to
    error: str | None = None  # the workload could not be read, or has no such container

    @property
    def current_already(self) -> bool:
        """It runs the digest already: nothing to roll, no gate asked."""
        return self.current is not None and self.current == self.desired

    @property
    def rolls(self) -> bool:
        """Every gate lets it go and the container runs something else: it would be patched."""
        return self.decision.goes and self.error is None and self.current != self.desired

    @property
    def unreadable(self) -> bool:
        """The workload could not be read, and no gate before its own stopped the move."""
        return self.error is not None and self.current is None and self.decision.verdict is Verdict.UNKNOWN

    def deferred_by(self, gate: GateName) -> str | None:
        """Why ``gate`` defers the move, whatever the gates before it say (None: it does not)."""
        return next((d.reason for d in self.decisions if d.gate is gate and d.verdict is Verdict.DEFER), None)


def explain_target(
    admission: Admission,
    move: Move,
    target: Target,
    known: Known,
    now: int,
    workloads: Callable[[str], Workloads] | None,
    *,
    every: bool = False,
) -> TargetPlan:
    """Read the target's workload (with ``workloads``; without, its gates answer unknown) and ask
    admission to explain: up to the first stop, or ``every`` gate. A target that runs the digest
    already has nothing to roll: no gate is asked (its image may be gone from the registry by
    now). Reads only: no slot is taken, no request sent, nothing recorded."""
    workload = None
    error: str | None = None
    if workloads is not None:
        try:
            workload = workloads(target.cluster).get(target.namespace, target.kind, target.name)
        except WorkloadError as exc:
            error = f"{type(exc).__name__}: {exc}"
    current = desired = None
    if workload is not None:
        current = workload.image_of(target.container)
        if current is None:
            error = f"no container {target.container!r}"
        else:
            desired = pinned_image(current, move.source, move.digest)
            if current == desired:
                return TargetPlan(target, (), Decision.go(), current, desired)
    known = replace(known, workload=workload)
    decisions = tuple(admission.explain(move, target, known, now, until_stop=not every))
    return TargetPlan(target, decisions, first_stop(decisions), current, desired, error)
