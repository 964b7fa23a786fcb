"""Apply one target: claim it for the digest, read its workload, ask admission's workload gates
(paused, the hold annotation, the GitOps owner), and patch ``repo:tag@<digest>`` into its container,
once per (target, digest) (the consumer wraps ``apply_target`` in its idempotency guard).

The claim is a conditional write: an older digest never replaces a newer one, and a hold refuses
it. The workload is read, decided on and patched with its resourceVersion as a precondition: a 409
reads it again and asks the gates again (``patch_with_retries``). A permanent failure is recorded
on the target and raised as ``TargetNotApplied`` (the guard stores no result, so a fixed cause
heals at the next enqueue); a transient one is raised as is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from tagpin.domain.config import GitOpsSettings, Kind, RolloutSettings, Target
from tagpin.domain.messages import TargetChange, Trigger, Verification, VerificationKind
from tagpin.domain.outcomes import ApplyOutcome, ApplyResult, RestoreOutcome
from tagpin.ports.queues import VerificationQueue
from tagpin.ports.state import State, TargetState, TargetStatus
from tagpin.ports.workloads import (
    Held,
    ImageChange,
    MissingContainer,
    NotFound,
    Owned,
    Paused,
    Workload,
    WorkloadError,
    Workloads,
)
from tagpin.usecases.admission import Admission, GateName, Known, Stage
from tagpin.usecases.admission.owner import live_owner, not_live
from tagpin.usecases.gitroute import GitRoute
from tagpin.usecases.interrupted import forget_old_claims, note_put_back, released_since, replaced, undoes
from tagpin.usecases.patch import patch_with_retries, pinned_image, restore, tagpin_annotations

logger = logging.getLogger(__name__)

FAILED_STATUS: dict[type[WorkloadError], TargetStatus] = {
    NotFound: TargetStatus.GONE,
    Paused: TargetStatus.PAUSED,
    Held: TargetStatus.HELD,
    Owned: TargetStatus.OWNED,
}
# A workload gate's stop, as the error that ends the patch step (recorded as FAILED_STATUS says).
REFUSED: dict[GateName, type[WorkloadError]] = {
    GateName.PAUSED: Paused,
    GateName.HOLD: Held,
    GateName.OWNER: Owned,
}


class TargetNotApplied(Exception):
    """A permanent failure, recorded on the target. Raised through the idempotency guard so that
    no result is stored for (target, digest): once the cause is fixed, the next enqueue applies."""

    def __init__(self, result: ApplyResult) -> None:
        super().__init__(result.error or "not applied")
        self.result = result


class TargetApplier:
    def __init__(
        self,
        *,
        state: State,
        workloads: Callable[[str], Workloads],
        clock: Callable[[], int],
        settings: Callable[[], RolloutSettings],
        verifications: VerificationQueue | None,
        admission: Admission,
        gitops: Callable[[], GitOpsSettings] = GitOpsSettings,
        git: GitRoute | None = None,
    ) -> None:
        self._state = state
        self._workloads = workloads
        self._clock = clock
        self._settings = settings
        self._verifications = verifications
        self._admission = admission
        self._gitops = gitops
        self._git = git or GitRoute(gitops, None)

    def apply_target(self, target_change: TargetChange) -> ApplyResult:
        tc = target_change
        kind = Kind(tc.kind)
        claimed_at = self._clock()
        if not self._state.targets.claim(
            tc.target_id, tc.move.image, tc.move.digest, tc.move.observed_at, tc.move.trigger, claimed_at
        ):
            return ApplyResult(outcome=ApplyOutcome.SUPERSEDED, target=tc.target_id)
        owned: list[str] = []  # who applies a target written back through Git (for its detail)
        try:
            previous, outcome, undo = self._patch(self._workloads(tc.cluster), tc, kind, claimed_at, owned)
        except WorkloadError as exc:
            status = FAILED_STATUS.get(type(exc), TargetStatus.FAILED)
            detail = f"{type(exc).__name__}: {exc}"
            self._finish(tc, status, detail=detail, claimed=True)  # never over a hold written since
            logger.warning(
                "apply failed", extra={"target": tc.target_id, "digest": tc.move.digest, "error": detail}
            )
            if exc.transient:
                raise
            raise TargetNotApplied(
                ApplyResult(outcome=ApplyOutcome(status), target=tc.target_id, error=detail)
            ) from None
        if outcome is ApplyOutcome.SUPERSEDED:  # claimed by a newer digest, or held, since: theirs
            logger.info(
                "superseded before the patch", extra={"target": tc.target_id, "digest": tc.move.digest}
            )
            return ApplyResult(outcome=outcome, target=tc.target_id)
        if outcome is ApplyOutcome.WRITE_BACK:  # claimed (pending): the write-back function commits it
            owner = owned[-1] if owned else None
            return ApplyResult(outcome=outcome, target=tc.target_id, previous_image=previous, detail=owner)
        # already-current: nothing was replaced, so the previous image stays the one last replaced.
        patched = outcome is ApplyOutcome.PATCHED
        last = previous if patched else None
        if not self._finish(tc, TargetStatus.APPLIED, detail=outcome.value, previous=last, claimed=True):
            held = self._held_since(tc)
            if held is None and patched and (bad := self._failed_since(tc)) is not None:
                return self._undo_failed(tc, kind, previous, bad)
            # Not held: claimed by a newer digest since (its own patch follows this one), recorded as
            # superseded; never written over a hold, so one written since that read is read again.
            if held is None and not self._finish(
                tc, TargetStatus.APPLIED, detail=outcome.value, previous=last
            ):
                held = self._held_since(tc)
            if held is not None:  # kept; what this claim patched is put back (usecases.interrupted)
                if patched and held.interrupts(claimed_at):
                    return self._put_back(tc, kind, undo, claimed_at)
                return ApplyResult(outcome=ApplyOutcome.HELD, target=tc.target_id, previous_image=previous)
        logger.info("applied", extra={"target": tc.target_id, "digest": tc.move.digest, "outcome": outcome})
        settings = self._settings()
        if self._verifications is not None and settings.verify:
            self._verifications.send(
                Verification(
                    kind=VerificationKind.VERIFY,
                    move=tc.move,
                    target_id=tc.target_id,
                    applied_at=self._clock(),
                ),
                settings.verify_interval_seconds if patched else 0,
            )
        return ApplyResult(outcome=outcome, target=tc.target_id, previous_image=previous)

    def _patch(
        self, workloads: Workloads, tc: TargetChange, kind: Kind, now: int, owned: list[str]
    ) -> tuple[str, ApplyOutcome, str]:
        """(the image the container ran, PATCHED, ALREADY_CURRENT or WRITE_BACK, the image a hold
        over this claim puts back: the one the first patch of the moves in flight replaced)."""
        move = tc.move
        target = Target(
            cluster=tc.cluster, namespace=tc.namespace, kind=kind, name=tc.name, container=tc.container
        )

        def step(workload: Workload) -> tuple[tuple[str, ApplyOutcome, str], ImageChange | None]:
            where = f"{kind.value} {tc.namespace}/{tc.name}"
            decision = self._admission.decide(move, target, Known(workload=workload), now, Stage.WORKLOAD)
            if not decision.goes:
                assert decision.gate is not None
                raise REFUSED.get(decision.gate, WorkloadError)(f"{where} is {decision.reason}")
            # An owned workload the owner gate let go because gitops.write_back configures it is
            # written back through Git; without a write-back queue in this function (GitWriteBack
            # disabled) it is refused as if nothing configured it.
            gitops = self._gitops()
            written = gitops.for_target(tc.move.image, tc.target_id)
            owner = live_owner(gitops, workload, tc.target_id) if written else None
            if owner is not None and not self._git.writes(tc.move.image, tc.target_id):
                raise Owned(f"{where} is {not_live(owner)}")
            # The claim, read again after the workload: a newer digest claimed the target (or a
            # person held it) since this one did, and a patch now would roll it backwards (or
            # against the person). A claim made after this read patches after it: the
            # resourceVersion this patch carries then no longer matches (409), and this runs again.
            claim = self._state.targets.get(tc.target_id)
            if claim is None or claim.digest != tc.move.digest or claim.status is not TargetStatus.PENDING:
                return ("", ApplyOutcome.SUPERSEDED, ""), None
            forget_old_claims(self._state, claim, now)
            init = tc.container not in workload.containers
            current = (workload.init_containers if init else workload.containers).get(tc.container)
            if current is None:
                raise MissingContainer(f"{where} has no container {tc.container!r}")
            desired = pinned_image(current, tc.move.source, tc.move.digest)
            if current == desired:
                return (current, ApplyOutcome.ALREADY_CURRENT, current), None
            if owner is not None:  # written back through Git instead of patched
                owned.append(str(owner))
                return (current, ApplyOutcome.WRITE_BACK, current), None
            # for a hold (usecases.interrupted): what goes back on if one stops the moves in flight
            undo = undoes(workload, tc.container, current, claim.claims | {now})
            notes = tagpin_annotations(
                workload,
                tc.container,
                tc.move.digest,
                self._clock(),
                tc.move.trigger,
                **replaced(workload, tc.container, undo, now),
            )
            change = ImageChange(workload.resource_version, tc.container, init, desired, notes)
            return (current, ApplyOutcome.PATCHED, undo), change

        return patch_with_retries(workloads, kind, tc.namespace, tc.name, step, tc.target_id)

    def _held_since(self, tc: TargetChange) -> TargetState | None:
        state = self._state.targets.get(tc.target_id)
        return state if state is not None and state.status is TargetStatus.HELD else None

    def _failed_since(self, tc: TargetChange) -> str | None:
        """Why the digest is marked bad for the tag now (None: it is not): its rollout failed on
        another target, whose rollback may have found this one not yet patched."""
        tag = self._state.tags.get(tc.move.image)
        if tag is None or not tag.blocked or tag.digest != tc.move.digest:
            return None
        return tag.bad_reason or "marked bad"

    def _undo_failed(self, tc: TargetChange, kind: Kind, previous: str, why: str) -> ApplyResult:
        """The digest failed (another target's rollback marked it bad and recorded this one,
        claimed, as it found it) while this PATCH was on its way: what it replaced goes back on, as
        the rollback would have done had the PATCH landed first, unless a person held the target
        since; never ``applied``, never verified."""
        put, now = self._restore(
            tc, kind, previous, lambda: None if self._held_since(tc) is None else RestoreOutcome.HELD
        )
        if put is RestoreOutcome.RESTORED:
            self._state.targets.finish(
                tc.target_id,
                tc.move.digest,
                TargetStatus.ROLLED_BACK,
                now,
                trigger=Trigger.ROLLBACK,
                detail=f"restored {previous}: the digest failed while it was being patched; {why}",
                previous_image=previous,
                correlation_id=tc.move.correlation_id,
                expected=frozenset({TargetStatus.FAILED}),
            )
        logger.warning(
            "the digest failed during the patch; the image it replaced is put back",
            extra={"target": tc.target_id, "digest": tc.move.digest, "restore": put.value},
        )
        return ApplyResult(
            outcome=ApplyOutcome.BLOCKED, target=tc.target_id, error=why, previous_image=previous
        )

    def _restore(
        self, tc: TargetChange, kind: Kind, image: str, stop: Callable[[], RestoreOutcome | None]
    ) -> tuple[RestoreOutcome, int]:
        """``image`` put back on the target's container over this change's digest (``restore``),
        unless ``stop`` says why not; and when (epoch ms)."""
        target = Target(
            cluster=tc.cluster, namespace=tc.namespace, kind=kind, name=tc.name, container=tc.container
        )
        now = self._clock()
        return restore(self._workloads(tc.cluster), target, image, tc.move.digest, now, stop=stop), now

    def _put_back(self, tc: TargetChange, kind: Kind, undo: str, claimed_at: int) -> ApplyResult:
        """A person held the target between the claim's last read and the patch (a hold is a row in
        the state table: it changes no resourceVersion, so the patch's precondition cannot see it).
        The hold is kept where it was asked for: the image the container ran before the moves in
        flight goes back on (``undo``: the image the first of their patches replaced), unless
        someone changed the workload since the patch (then theirs stands), or the hold is no longer
        over this claim: read again after each read of the workload, as the reconciler does
        (``usecases.interrupted``), so a release that lands before then stands. One that lands
        between that read and the PATCH is not seen: the state table and the workload are two
        stores, nothing writes both as one, and the image still goes back (the window is one call)."""
        released = partial(released_since, self._state, tc.target_id, claimed_at)
        put, now = self._restore(tc, kind, undo, released)
        if put is RestoreOutcome.RESTORED:
            note_put_back(self._state, tc.target_id, tc.move.digest, undo, now, tc.move.trigger)
        logger.warning(
            "held during the patch; the image it ran is put back unless the hold is gone",
            extra={"target": tc.target_id, "digest": tc.move.digest, "restore": put.value},
        )
        return ApplyResult(outcome=ApplyOutcome.HELD, target=tc.target_id, previous_image=undo)

    def _finish(
        self,
        tc: TargetChange,
        status: TargetStatus,
        *,
        detail: str,
        previous: str | None = None,
        claimed: bool = False,
    ) -> bool:
        """Record ``status`` for the target's digest; ``claimed``: only while the target is still
        as this claim left it (pending), else nothing is written and False is returned."""
        return self._state.targets.finish(
            tc.target_id,
            tc.move.digest,
            status,
            self._clock(),
            trigger=tc.move.trigger,
            detail=detail,
            previous_image=previous,
            correlation_id=tc.move.correlation_id,
            expected=frozenset({TargetStatus.PENDING}) if claimed else None,
        )
