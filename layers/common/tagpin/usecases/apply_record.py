"""What admission decided for a change, recorded once: the result the consumer reports, the
target's state and notes, the image's audit trail and its notifications.

One ``Round`` per ``Applier.apply``: it keeps what the round owes the queue (the failures that make
the message come back, the shortest deferral a ``retry`` verification waits for) and asks a person's
approval once per wave.

- superseded, bad digest (the move as a whole): the change's one result; nothing recorded.
- await approval: the wave's request (``Approvals.request``: recorded and announced once).
- hold: ``held``, with the hold's reason.
- platform, signature: recorded and announced once per (target, digest) (``blocked``), a
  transient one fails the change (the queue brings it back); a warning is recorded once
  (``unverified``) and the move goes on.
- window, slot: the target is claimed (unless it is being verified), the deferral recorded
  once, and a ``retry`` verification sent for the shortest wait.
- unknown: a gate could not answer; the change fails (tried again).

The workload's gates (paused, the hold annotation, the owner) decide in the patch step, which
records them on the target (``tagpin.usecases.apply_target``).
"""

from __future__ import annotations

import logging

from tagpin.domain.config import Target
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome, ApplyResult
from tagpin.ports.notify import RolloutEventKind
from tagpin.ports.state import ImageEvent, Promotion, State, TargetNote, TargetState, TargetStatus
from tagpin.usecases.admission import Decision, GateName, Verdict
from tagpin.usecases.approvals import Approvals
from tagpin.usecases.audit import Audit
from tagpin.usecases.waves import PlannedWave

logger = logging.getLogger(__name__)

# A stop's outcome in the consumer's results (and, for the workload's gates, the target's status)
# where it is not its verdict's (``BY_VERDICT``): a new gate that blocks, defers or awaits needs none.
STOPPED: dict[GateName, ApplyOutcome] = {
    GateName.SUPERSEDED: ApplyOutcome.SUPERSEDED,
    GateName.HOLD: ApplyOutcome.HELD,
    GateName.PAUSED: ApplyOutcome.PAUSED,
    GateName.OWNER: ApplyOutcome.OWNED,
}
BY_VERDICT: dict[Verdict, ApplyOutcome] = {
    Verdict.BLOCK: ApplyOutcome.BLOCKED,
    Verdict.DEFER: ApplyOutcome.DEFERRED,
    Verdict.AWAIT_APPROVAL: ApplyOutcome.AWAITING_APPROVAL,
    Verdict.UNKNOWN: ApplyOutcome.FAILED,
}


def outcome_of(decision: Decision) -> ApplyOutcome:
    """What the consumer reports for a decision that stops the move."""
    assert decision.gate is not None and not decision.goes
    return STOPPED.get(decision.gate) or BY_VERDICT[decision.verdict]


def move_stopped(move: Move, decision: Decision) -> ApplyResult:
    """The whole change's result when a gate of the move stops it."""
    assert decision.gate is not None
    if decision.gate is GateName.SUPERSEDED:
        logger.info(
            "change superseded by a newer digest",
            extra={"image": move.image, "digest": move.digest, "current": decision.reason},
        )
    else:
        logger.warning(
            "digest marked bad for the tag, or its promotion halted; not applied until the tag moves",
            extra={"image": move.image, "digest": move.digest, "reason": decision.reason},
        )
    return ApplyResult(outcome=outcome_of(decision), image=move.image, detail=decision.reason or None)


class Round:
    def __init__(
        self, state: State, audit: Audit, approvals: Approvals | None, move: Move, promotion: Promotion
    ) -> None:
        self._state = state
        self._audit = audit
        self._approvals = approvals
        self._move = move
        self._promotion = promotion
        self._asked: set[int] = set()
        self.failed: list[str] = []  # transient failures: the change fails, the queue retries it
        self.deferred: list[int] = []  # seconds until each deferred target may start

    def fail(self, target: Target, why: str, error: str) -> ApplyResult:
        self.failed.append(f"{target.id}: {why}")
        return ApplyResult(outcome=ApplyOutcome.FAILED, target=target.id, error=error)

    def record(
        self, target: Target, wave: PlannedWave, known: TargetState | None, decision: Decision, now: int
    ) -> ApplyResult | None:
        """Record a target's decision; its result, or None when the move may start there."""
        for warning in decision.warnings:
            self._warned(target, warning, now)
        if decision.goes:
            return None
        gate = decision.gate
        if gate is None or decision.verdict is Verdict.UNKNOWN:
            return self.fail(target, f"{gate}: {decision.reason}", decision.reason or "not decided")
        if decision.verdict is Verdict.AWAIT_APPROVAL:
            if self._approvals is not None and wave.index not in self._asked:
                self._asked.add(wave.index)
                self._approvals.request(self._move, self._promotion, wave)
            return ApplyResult(outcome=outcome_of(decision), target=target.id, detail=decision.reason)
        if decision.verdict is Verdict.DEFER:
            return self._deferred(target, wave, known, decision, now)
        if gate is GateName.HOLD:  # a person stepped in: not patched back
            return ApplyResult(outcome=outcome_of(decision), target=target.id, detail=decision.reason or None)
        return self._blocked(target, decision, now)

    def _deferred(
        self, target: Target, wave: PlannedWave, known: TargetState | None, decision: Decision, now: int
    ) -> ApplyResult:
        move, reason = self._move, decision.reason
        detail = f"deferred: {reason}"
        logger.info("rollout deferred", extra={"target": target.id, "digest": move.digest, "reason": reason})
        if known is None or known.status is not TargetStatus.APPLIED:  # never interrupt a verification
            self._state.targets.claim(
                target.id, move.image, move.digest, move.observed_at, move.trigger, now, detail=detail
            )
        self._once(
            target, ImageEvent.DEFERRED, reason, now, note=(TargetNote.DEFERRED, detail), wave=wave.name
        )
        self.deferred.append(decision.wait_s)
        return ApplyResult(outcome=ApplyOutcome.DEFERRED, target=target.id)

    def _blocked(self, target: Target, decision: Decision, now: int) -> ApplyResult:
        """A gate refused the digest for the target: recorded and announced once (per target and
        digest), shown by plan; a transient refusal (the registry could not say) is tried again."""
        detail = f"{decision.gate}: {decision.reason}"
        if decision.transient:
            return self.fail(target, detail, decision.reason)
        self._once(
            target,
            ImageEvent.BLOCKED,
            detail,
            now,
            note=(TargetNote.BLOCKED, detail),
            announce=RolloutEventKind.BLOCKED,
            targets=[target.id],
        )
        logger.warning("not rolled: a trust gate blocks it", extra={"target": target.id, "detail": detail})
        return ApplyResult(outcome=ApplyOutcome.BLOCKED, target=target.id, detail=detail)

    def _warned(self, target: Target, warning: Decision, now: int) -> None:
        """A gate in warn mode failed: the digest rolls; the reason is recorded once (per target
        and digest) and logged. A transient failure (the registry could not say) is only logged."""
        detail = f"{warning.gate}: {warning.reason}"
        logger.warning(
            "rolled although a trust gate in warn mode would block it",
            extra={"target": target.id, "detail": detail},
        )
        if warning.transient:
            return
        self._once(target, ImageEvent.UNVERIFIED, detail, now)

    def _once(
        self,
        target: Target,
        event: ImageEvent,
        detail: str,
        now: int,
        *,
        note: tuple[TargetNote, str] | None = None,
        announce: RolloutEventKind | None = None,
        targets: list[str] | None = None,
        wave: str | None = None,
    ) -> None:
        """A decision on one target, recorded in the image's trail (and announced) once per
        (target, digest), and with it ``note`` in the target's."""
        move = self._move
        recorded = self._audit.record(
            move,
            event,
            now,
            once=f"{event}_{target.id}",
            detail=f"{target.id}: {detail}",
            wave=wave,
            announce=announce,
            targets=targets or (),
        )
        if recorded and note is not None:
            self._state.targets.note(target.id, move.digest, note[0], now, note[1], move.trigger)
