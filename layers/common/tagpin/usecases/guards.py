"""What may hold a rollout back, checked before anything is patched:

- the change is superseded (the tag already moved to a newer digest) or its digest is marked bad
  (a rollout of it failed): nothing of it is applied, whichever path brings it;
- a target is outside its maintenance window, or its cluster already has
  ``rollout.max_concurrent_per_cluster`` rollouts in progress: the target is deferred (recorded
  once, tried again by a delayed ``retry`` verification), never interrupted mid-verification;
- a workload is owned by Argo CD or Flux (``live_owner``), which would revert a live patch: not
  patched unless ``gitops.patch_live`` names it (docs/gitops.md).
"""

from __future__ import annotations

import logging

from tagpin.domain.config import GitOpsSettings, RolloutSettings, Target
from tagpin.domain.gitops.owners import Owner
from tagpin.domain.messages import Change
from tagpin.domain.outcomes import ApplyOutcome, ApplyResult
from tagpin.ports.state import ImageEvent, State, TagState, TargetNote, TargetState, TargetStatus
from tagpin.ports.workloads import Workload
from tagpin.usecases.audit import Audit
from tagpin.usecases.waves import PlannedWave, window_gate

logger = logging.getLogger(__name__)


def change_gate(change: Change, current: TagState | None) -> ApplyResult | None:
    """Why the whole change must not be applied, or None when it may be."""
    if current is None:
        return None
    if current.digest != change.digest and current.observed_at > change.observed_at:
        logger.info(
            "change superseded by a newer digest",
            extra={"image": change.image, "digest": change.digest, "current": current.digest},
        )
        return ApplyResult(
            outcome=ApplyOutcome.SUPERSEDED, image=change.image, detail=f"current: {current.digest}"
        )
    if current.blocked and current.digest == change.digest:
        logger.warning(
            "digest marked bad for the tag; not applied until the tag moves",
            extra={"image": change.image, "digest": change.digest, "reason": current.bad_reason},
        )
        return ApplyResult(outcome=ApplyOutcome.BLOCKED, image=change.image, detail=current.bad_reason)
    return None


def live_owner(settings: GitOpsSettings, workload: Workload, target_id: str) -> Owner | None:
    """The GitOps tool that owns ``workload`` when tagpin may not patch it live, else None."""
    owner = settings.owner_of(workload.labels, workload.annotations)
    return None if owner is None or settings.live_allowed(target_id) else owner


def not_live(owner: Owner) -> str:
    """Why an owned workload is not patched, and what to configure (status, plan, history)."""
    return (
        f"managed by {owner} ({owner.evidence}): not patched live, {owner.tool.value} would revert "
        "it; write it back through Git, or name the target in gitops.patch_live (docs/gitops.md)"
    )


class StartGate:
    def __init__(self, state: State, audit: Audit) -> None:
        self._state = state
        self._audit = audit

    def deferral(
        self,
        settings: RolloutSettings,
        change: Change,
        target: Target,
        st: TargetState | None,
        wave: PlannedWave,
        now: int,
    ) -> int | None:
        """Seconds until the target may be tried again, or None when it may start now (then it
        holds one of its cluster's rollout slots, when there is a limit)."""
        gate = window_gate(settings, target, now)
        wait, reason = gate.opens_in_s, gate.reason
        if gate.open:
            limit = settings.max_concurrent_per_cluster
            stale_ms = (settings.verify_timeout_seconds + 2 * settings.verify_interval_seconds + 600) * 1000
            if not limit or self._state.slots.acquire(
                target.cluster, target.id, change.digest, limit, now, stale_ms
            ):
                return None
            wait = settings.verify_interval_seconds
            reason = f"cluster {target.cluster} has {limit} rollouts in progress (max_concurrent_per_cluster)"
        detail = f"deferred: {reason}"
        logger.info(
            "rollout deferred", extra={"target": target.id, "digest": change.digest, "reason": reason}
        )
        if st is None or st.status is not TargetStatus.APPLIED:  # never interrupt a verification
            self._state.targets.claim(
                target.id, change.image, change.digest, change.observed_at, change.trigger, now, detail=detail
            )
        if self._audit.record(
            change.image,
            change.digest,
            ImageEvent.DEFERRED,
            now,
            once=f"deferred_{target.id}",
            detail=f"{target.id}: {reason}",
            wave=wave.name,
        ):
            self._state.targets.note(
                target.id, change.digest, TargetNote.DEFERRED, now, detail, change.trigger
            )
        return wait

    def release(self, settings: RolloutSettings, target: Target, digest: str) -> None:
        """Give the target's rollout slot back (when there is a limit)."""
        if settings.max_concurrent_per_cluster:
            self._state.slots.release(target.cluster, target.id, digest)
