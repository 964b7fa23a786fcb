"""The dry run (``rollout.dry_run``): what a rollout of a digest would do on every target, recorded
once per digest (each target's ``planned`` note and the image's ``dry-run`` event); nothing patched.
Each target's answer is admission's (``tagpin.usecases.explain``), as ``tagpin plan``'s is."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tagpin.domain.config import FollowedImage
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome, ApplyResult
from tagpin.ports.state import ImageEvent, Promotion, State, TagState, TargetNote
from tagpin.ports.workloads import Workloads
from tagpin.usecases.admission import Admission, GateName, Known, Verdict
from tagpin.usecases.explain import TargetPlan, explain_target
from tagpin.usecases.waves import PlannedWave

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedTarget:
    """A dry run's answer for one target: what a rollout would do there now."""

    target: str
    wave: str
    # "patch", "wait: <which wave>" (patched once its wave starts), "none", "none: <why>",
    # "unknown: <error>"
    action: str
    current: str | None = None
    desired: str | None = None
    window: str | None = None  # the maintenance window that would defer it


def planned(plan: TargetPlan, wave: str) -> PlannedTarget:
    window = plan.deferred_by(GateName.WINDOW)
    if plan.unreadable:
        return PlannedTarget(plan.target.id, wave, f"unknown: {plan.error}", window=window)
    if plan.decision.verdict is Verdict.WAIT:  # nothing else stops it: patched once its wave starts
        action = f"wait: {plan.decision.reason}" if plan.error is None else f"none: {plan.error}"
    elif not plan.decision.goes:
        action = f"none: {plan.decision.summary}"
    elif plan.error is not None:
        action = f"none: {plan.error}"
    else:
        action = "patch" if plan.rolls else "none"
    return PlannedTarget(plan.target.id, wave, action, plan.current, plan.desired, window)


class DryRun:
    def __init__(self, state: State, admission: Admission, workloads: Callable[[str], Workloads]) -> None:
        self._state = state
        self._admission = admission
        self._workloads = workloads

    def record(
        self,
        move: Move,
        followed: FollowedImage,
        waves: list[PlannedWave],
        tag: TagState | None,
        promotion: Promotion,
        now: int,
    ) -> list[ApplyResult]:
        """Record what a rollout of ``move`` would do on every target; patch nothing."""
        states = self._state.targets.get_many([t.id for w in waves for t in w.targets])
        rows = [
            planned(
                explain_target(
                    self._admission,
                    move,
                    target,
                    Known(followed, wave, tag, states.get(target.id), promotion, waves=tuple(waves)),
                    now,
                    self._workloads,
                ),
                wave.name,
            )
            for wave in waves
            for target in wave.targets
        ]
        for row in rows:
            detail = f"dry-run, wave {row.wave}: {row.action}"
            if row.desired is not None:
                detail += f" {row.current} -> {row.desired}"
            self._state.targets.note(row.target, move.digest, TargetNote.PLANNED, now, detail, move.trigger)
        shown = [_present(asdict(r)) for r in rows]
        self._state.history.image_event(
            move.image,
            move.digest,
            ImageEvent.DRY_RUN,
            now,
            detail=json.dumps(shown, sort_keys=True),
            trigger=move.trigger,
            correlation_id=move.correlation_id,
        )
        logger.info("dry run: plan recorded, nothing patched", extra={"image": move.image, "plan": shown})
        return [ApplyResult(outcome=ApplyOutcome.PLANNED, target=r.target, detail=r.action) for r in rows]


def _present(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if v is not None}
