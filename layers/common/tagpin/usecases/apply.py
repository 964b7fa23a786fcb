"""Apply a change: move every target of a tag to ``repo:tag@<digest>``, once per (target, digest).

The cluster side is a port (``tagpin.ports.workloads.Workloads``). Each target is applied through
an idempotency guard (powertools on DynamoDB in the consumer) keyed on target and digest, so a
duplicated or replayed message never rolls a workload twice; the state's conditional claim makes
sure an older digest never replaces a newer one.

With a verification queue, every patch is followed by a delayed ``verify`` verification
(``tagpin.usecases.verify``): the target is ``applied`` until the workload has rolled out
(``verified``) or failed (then it is rolled back and the digest marked bad for the tag). The waves
of ``rollout.waves`` gate which targets a change may touch: only those of the promotion's active
wave and the waves before it (``tagpin.usecases.promote`` advances the promotion). What may hold a
target back is in ``tagpin.usecases.guards``; what is written on the workload in
``tagpin.usecases.patch``; ``rollout.dry_run`` records the plan and patches nothing.

Failures split in two. Transient ones (cluster unreachable, 5xx, a conflict that outlasts the
retries) are raised, so the SQS record fails, is retried and ends in the dead-letter queue.
Permanent ones (the workload is gone, RBAC forbids the patch, the container does not exist) are
recorded on the target and reported without failing the message; neither kind is stored by the
idempotency guard, and the poller re-enqueues a target that is behind, so a fixed permission or a
workload created later heals by itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from tagpin.domain.annotations import ANNOTATION_HOLD, ANNOTATION_PAUSED
from tagpin.domain.budget import UNLIMITED, Budget
from tagpin.domain.channels import pinned_source
from tagpin.domain.config import FollowedImage, GitOpsSettings, Kind, RolloutSettings, Target
from tagpin.domain.messages import Change, TargetChange, Verification, VerificationKind
from tagpin.domain.outcomes import ApplyOutcome, ApplyResult
from tagpin.ports.notify import Notifier, RolloutEventKind
from tagpin.ports.queues import VerificationQueue
from tagpin.ports.state import ImageEvent, Promotion, PromotionStatus, State, TargetNote, TargetStatus
from tagpin.ports.workloads import (
    Held,
    MissingContainer,
    NotFound,
    Owned,
    Paused,
    Workload,
    WorkloadError,
    Workloads,
)
from tagpin.usecases.approvals import Approvals, needs_approval
from tagpin.usecases.audit import Audit
from tagpin.usecases.gitroute import GitRoute
from tagpin.usecases.guards import StartGate, change_gate, live_owner, not_live
from tagpin.usecases.patch import image_patch, patch_with_retries, pinned_image, tagpin_annotations
from tagpin.usecases.trust import Blocked, TrustGates
from tagpin.usecases.waves import PlannedWave, plan, window_gate

if TYPE_CHECKING:
    from tagpin.usecases.promote import Promoter

logger = logging.getLogger(__name__)

Guard = Callable[[Callable[..., ApplyResult]], Callable[..., ApplyResult]]
FAILED_STATUS: dict[type[WorkloadError], TargetStatus] = {
    NotFound: TargetStatus.GONE,
    Paused: TargetStatus.PAUSED,
    Held: TargetStatus.HELD,
    Owned: TargetStatus.OWNED,
}


class ChangeFailed(Exception):
    """At least one target failed transiently; the message must be retried."""


class TargetNotApplied(Exception):
    """A permanent failure, recorded on the target. Raised through the idempotency guard so that
    no result is stored for (target, digest): once the cause is fixed, the next enqueue applies."""

    def __init__(self, result: ApplyResult) -> None:
        super().__init__(result.error or "not applied")
        self.result = result


@dataclass(frozen=True)
class PlannedTarget:
    """A dry run's answer for one target: what a rollout would do there now."""

    target: str
    wave: str
    action: str  # "patch", "none", "none: <why>", "unknown: <error>"
    current: str | None = None
    desired: str | None = None
    window: str | None = None  # the maintenance window that would defer it


class Applier:
    def __init__(
        self,
        *,
        followed: Callable[[], Mapping[str, FollowedImage]],
        state: State,
        workloads: Callable[[str], Workloads],
        clock: Callable[[], int],
        guard: Guard | None = None,
        settings: Callable[[], RolloutSettings] = RolloutSettings,
        verifications: VerificationQueue | None = None,
        promoter: Promoter | None = None,
        notifier: Notifier | None = None,
        trust: TrustGates | None = None,
        approvals: Approvals | None = None,
        gitops: Callable[[], GitOpsSettings] = GitOpsSettings,
        git: GitRoute | None = None,
    ) -> None:
        """Without ``verifications`` nothing is verified (``applied`` is final); without
        ``promoter`` waves do not advance by themselves; without ``trust`` no gate is checked."""
        self._followed = followed
        self._state = state
        self._workloads = workloads
        self._clock = clock
        self._settings = settings
        self._verifications = verifications
        self._promoter = promoter
        self._audit = Audit(state, notifier)
        self._gate = StartGate(state, self._audit)
        self._apply_target = guard(self.apply_target) if guard else self.apply_target
        self._trust = trust
        self._approvals = approvals
        self._gitops = gitops
        self._git = git or GitRoute(gitops, None)  # owned targets gitops.write_back configures: through Git

    def apply(self, change: Change, budget: Budget = UNLIMITED) -> list[ApplyResult]:  # noqa: PLR0915
        """Apply ``change`` to every target it may touch now; a target is started only while
        ``budget`` lasts (the rest fail the change, so the queue delivers it again)."""
        followed = self._followed().get(change.image)
        if followed is None:
            logger.info(
                "change for an image no longer followed; nothing to do", extra={"image": change.image}
            )
            return [ApplyResult(outcome=ApplyOutcome.NOT_FOLLOWED, image=change.image)]
        held = change_gate(change, self._state.tags.get(change.image))
        if held is not None:
            return [held]
        settings = self._settings()
        now = self._clock()
        promotion = self._state.promotions.start(
            change.image,
            change.digest,
            change.observed_at,
            now,
            trigger=change.trigger,
            correlation_id=change.correlation_id,
            dry_run=settings.dry_run,
            tag=change.tag,
        )
        if promotion is None:
            return [ApplyResult(outcome=ApplyOutcome.SUPERSEDED, image=change.image)]
        waves = plan(settings, list(followed.targets))
        if promotion.started:
            self._state.history.image_event(
                change.image,
                change.digest,
                ImageEvent.STARTED
                if promotion.status is PromotionStatus.ROLLING
                else ImageEvent.DRY_RUN_STARTED,
                now,
                detail="waves: " + ", ".join(f"{w.name} ({len(w.targets)})" for w in waves if w.targets),
                trigger=change.trigger,
                correlation_id=change.correlation_id,
            )
        if promotion.status is PromotionStatus.DRY_RUN:
            return self._dry_run(change, waves, settings, promotion.started)
        if promotion.status is PromotionStatus.HALTED:
            return [ApplyResult(outcome=ApplyOutcome.BLOCKED, image=change.image, detail=promotion.detail)]
        # A complete promotion heals every target (a manual edit, a lost message); a rolling one
        # touches only the waves it has reached.
        last = len(waves) - 1 if promotion.status is PromotionStatus.COMPLETE else promotion.wave
        active = [w for w in waves if w.index <= last]
        active, waiting = self._approval_first(change, promotion, followed, waves, active, last)
        states = self._state.targets.get_many([t.id for w in active for t in w.targets])
        results: list[ApplyResult] = list(waiting)
        git = self._git.batch(change, [t.id for w in active for t in w.targets])  # (gitroute)
        failed: list[str] = []
        deferred: list[int] = []
        for wave in active:
            for target in wave.targets:
                if budget.exhausted():
                    failed.append(f"{target.id}: not started, out of time in this invocation")
                    results.append(
                        ApplyResult(outcome=ApplyOutcome.FAILED, target=target.id, error="out of time")
                    )
                    continue
                known = states.get(target.id)
                if known is not None and known.holds(change.digest, now):
                    # a person stepped in: not patched back (until the tag moves, or a release)
                    results.append(
                        ApplyResult(outcome=ApplyOutcome.HELD, target=target.id, detail=known.detail)
                    )
                    continue
                if self._trust is not None and (
                    blocked := self._trust.check(followed, change.digest, target)
                ):
                    if blocked.enforced:
                        results.append(self._blocked(change, target, blocked, failed, now))
                        continue
                    self._warned(change, target, blocked, now)
                wait = self._gate.deferral(settings, change, target, known, wave, now)
                if wait is not None:
                    deferred.append(wait)
                    results.append(ApplyResult(outcome=ApplyOutcome.DEFERRED, target=target.id))
                    continue
                results.append(git.done(self._apply_one(change, target, settings, failed)))
        git.flush()  # one write request per repository, each sent once its targets are decided
        if deferred and self._verifications is not None:
            self._verifications.send(
                Verification(
                    kind=VerificationKind.RETRY,
                    image=change.image,
                    digest=change.digest,
                    observed_at=change.observed_at,
                    trigger=change.trigger,
                    correlation_id=change.correlation_id,
                ),
                min(deferred),
            )
        if any(r.outcome is ApplyOutcome.PATCHED for r in results):
            wave = waves[min(last, len(waves) - 1)]
            self._audit.record(
                change.image,
                change.digest,
                ImageEvent.APPLIED,
                now,
                once=f"applied_{wave.index}",
                detail=", ".join(t.id for t in wave.targets),
                wave=wave.name,
                trigger=change.trigger,
                correlation_id=change.correlation_id,
                announce=RolloutEventKind.APPLIED,
                targets=[t.id for t in wave.targets],
            )
        if self._promoter is not None:
            self._promoter.evaluate(change.image, change.digest)
        if failed:
            raise ChangeFailed("; ".join(failed))
        return results

    def _apply_one(
        self, change: Change, target: Target, settings: RolloutSettings, failed: list[str]
    ) -> ApplyResult:
        work = TargetChange(
            target_id=target.id,
            cluster=target.cluster,
            namespace=target.namespace,
            kind=target.kind.value,
            name=target.name,
            container=target.container,
            image=change.image,
            digest=change.digest,
            observed_at=change.observed_at,
            trigger=change.trigger,
            correlation_id=change.correlation_id,
            reconcile_run=change.reconcile_run,
            changed_at=change.changed_at,
            tag=change.tag,
        )
        try:
            result = self._apply_target(target_change=work)
        except TargetNotApplied as exc:
            result = exc.result
        except WorkloadError as exc:
            failed.append(f"{target.id}: {exc}")
            result = ApplyResult(outcome=ApplyOutcome.FAILED, target=target.id, error=str(exc))
        rolled = result.outcome in (
            ApplyOutcome.PATCHED,
            ApplyOutcome.ALREADY_CURRENT,
            ApplyOutcome.WRITE_BACK,
        )
        if not (rolled and self._verifying(settings)):  # the verifier releases it otherwise
            self._gate.release(settings, target, change.digest)
        return result

    def _approval_first(
        self,
        change: Change,
        promotion: Promotion,
        followed: FollowedImage,
        waves: list[PlannedWave],
        active: list[PlannedWave],
        last: int,
    ) -> tuple[list[PlannedWave], list[ApplyResult]]:
        """A wave that needs a person's approval waits (asked once); the earlier waves go on."""
        gate_wave = waves[min(last, len(waves) - 1)]
        if (
            self._approvals is None
            or promotion.status is not PromotionStatus.ROLLING
            or not needs_approval(followed, gate_wave)
            or gate_wave.index in promotion.approved_waves
        ):
            return active, []
        self._approvals.request(change, promotion, gate_wave)
        waiting = [
            ApplyResult(
                outcome=ApplyOutcome.AWAITING_APPROVAL,
                target=t.id,
                detail=f"wave {gate_wave.name} waits for approval",
            )
            for t in gate_wave.targets
        ]
        return [w for w in active if w.index < gate_wave.index], waiting

    def _blocked(
        self, change: Change, target: Target, blocked: Blocked, failed: list[str], now: int
    ) -> ApplyResult:
        """A gate refused the digest for the target: recorded and announced once (per target and
        digest), shown by plan; a transient refusal (the registry could not say) is tried again."""
        if blocked.transient:
            failed.append(f"{target.id}: {blocked.gate}: {blocked.reason}")
            return ApplyResult(outcome=ApplyOutcome.FAILED, target=target.id, error=blocked.reason)
        detail = f"{blocked.gate}: {blocked.reason}"
        if self._audit.record(
            change.image,
            change.digest,
            ImageEvent.BLOCKED,
            now,
            once=f"blocked_{target.id}",
            detail=f"{target.id}: {detail}",
            trigger=change.trigger,
            correlation_id=change.correlation_id,
            announce=RolloutEventKind.BLOCKED,
            targets=[target.id],
        ):
            self._state.targets.note(
                target.id, change.digest, TargetNote.BLOCKED, now, detail, change.trigger
            )
        logger.warning("not rolled: a trust gate blocks it", extra={"target": target.id, "detail": detail})
        return ApplyResult(outcome=ApplyOutcome.BLOCKED, target=target.id, detail=detail)

    def _warned(self, change: Change, target: Target, blocked: Blocked, now: int) -> None:
        """A gate in warn mode failed: the digest rolls; the reason is recorded once (per target
        and digest) and logged. A transient failure (the registry could not say) is only logged."""
        detail = f"{blocked.gate}: {blocked.reason}"
        logger.warning(
            "rolled although a trust gate in warn mode would block it",
            extra={"target": target.id, "detail": detail},
        )
        if blocked.transient:
            return
        self._audit.record(
            change.image,
            change.digest,
            ImageEvent.UNVERIFIED,
            now,
            once=f"unverified_{target.id}",
            detail=f"{target.id}: {detail}",
            trigger=change.trigger,
            correlation_id=change.correlation_id,
        )

    def _verifying(self, settings: RolloutSettings) -> bool:
        return settings.verify and self._verifications is not None

    def _dry_run(
        self, change: Change, waves: list[PlannedWave], settings: RolloutSettings, first: bool
    ) -> list[ApplyResult]:
        """Record what a rollout would do (once per digest); patch nothing."""
        if not first:
            return [
                ApplyResult(outcome=ApplyOutcome.PLANNED, image=change.image, detail="plan already recorded")
            ]
        now = self._clock()
        rows = [
            self._plan_target(change, settings, wave, target, now)
            for wave in waves
            for target in wave.targets
        ]
        for row in rows:
            detail = f"dry-run, wave {row.wave}: {row.action}"
            if row.desired is not None:
                detail += f" {row.current} -> {row.desired}"
            self._state.targets.note(
                row.target, change.digest, TargetNote.PLANNED, now, detail, change.trigger
            )
        self._state.history.image_event(
            change.image,
            change.digest,
            ImageEvent.DRY_RUN,
            now,
            detail=json.dumps([_present(asdict(r)) for r in rows], sort_keys=True),
            trigger=change.trigger,
            correlation_id=change.correlation_id,
        )
        logger.info(
            "dry run: plan recorded, nothing patched",
            extra={"image": change.image, "plan": [_present(asdict(r)) for r in rows]},
        )
        return [ApplyResult(outcome=ApplyOutcome.PLANNED, target=r.target, detail=r.action) for r in rows]

    def _plan_target(
        self, change: Change, settings: RolloutSettings, wave: PlannedWave, target: Target, now: int
    ) -> PlannedTarget:
        gate = window_gate(settings, target, now)
        window = None if gate.open else gate.reason
        try:
            workload = self._workloads(target.cluster).get(target.namespace, target.kind, target.name)
        except WorkloadError as exc:
            return PlannedTarget(target.id, wave.name, f"unknown: {type(exc).__name__}: {exc}", window=window)
        running = workload.image_of(target.container)
        if running is None:
            return PlannedTarget(
                target.id, wave.name, f"none: no container {target.container!r}", window=window
            )
        desired = pinned_image(running, pinned_source(change.image, change.tag), change.digest)
        action = "none" if running == desired else "patch"
        if workload.paused:
            action = f"none: annotated {ANNOTATION_PAUSED}"
        elif (owner := live_owner(self._gitops(), workload, target.id)) is not None:
            action = f"none: {not_live(owner)}"
        return PlannedTarget(target.id, wave.name, action, running, desired, window)

    def apply_target(self, target_change: TargetChange) -> ApplyResult:
        tc = target_change
        kind = Kind(tc.kind)
        if not self._state.targets.claim(
            tc.target_id, tc.image, tc.digest, tc.observed_at, tc.trigger, self._clock()
        ):
            return ApplyResult(outcome=ApplyOutcome.SUPERSEDED, target=tc.target_id)
        try:
            previous, outcome = self._patch(self._workloads(tc.cluster), tc, kind)
        except WorkloadError as exc:
            status = FAILED_STATUS.get(type(exc), TargetStatus.FAILED)
            detail = f"{type(exc).__name__}: {exc}"
            self._finish(tc, status, detail=detail)
            logger.warning(
                "apply failed", extra={"target": tc.target_id, "digest": tc.digest, "error": detail}
            )
            if exc.transient:
                raise
            raise TargetNotApplied(
                ApplyResult(outcome=ApplyOutcome(status), target=tc.target_id, error=detail)
            ) from None
        if outcome is ApplyOutcome.SUPERSEDED:  # claimed by a newer digest, or held, since: theirs
            logger.info("superseded before the patch", extra={"target": tc.target_id, "digest": tc.digest})
            return ApplyResult(outcome=outcome, target=tc.target_id)
        if outcome is ApplyOutcome.WRITE_BACK:  # claimed (pending): the write-back function commits it
            return ApplyResult(outcome=outcome, target=tc.target_id, previous_image=previous)
        # already-current: nothing was replaced, so the previous image stays the one last replaced.
        patched = outcome is ApplyOutcome.PATCHED
        self._finish(tc, TargetStatus.APPLIED, detail=outcome.value, previous=previous if patched else None)
        logger.info("applied", extra={"target": tc.target_id, "digest": tc.digest, "outcome": outcome})
        settings = self._settings()
        if self._verifications is not None and settings.verify:
            self._verifications.send(
                Verification(
                    kind=VerificationKind.VERIFY,
                    image=tc.image,
                    digest=tc.digest,
                    observed_at=tc.observed_at,
                    target_id=tc.target_id,
                    applied_at=self._clock(),
                    trigger=tc.trigger,
                    correlation_id=tc.correlation_id,
                ),
                settings.verify_interval_seconds if patched else 0,
            )
        return ApplyResult(outcome=outcome, target=tc.target_id, previous_image=previous)

    def _patch(self, workloads: Workloads, tc: TargetChange, kind: Kind) -> tuple[str, ApplyOutcome]:
        """(the image the container ran, PATCHED or ALREADY_CURRENT)."""

        def step(workload: Workload) -> tuple[tuple[str, ApplyOutcome], dict[str, Any] | None]:
            where = f"{kind.value} {tc.namespace}/{tc.name}"
            if workload.paused:
                raise Paused(f"{where} is annotated {ANNOTATION_PAUSED}")
            if workload.held:
                raise Held(f"{where} is annotated {ANNOTATION_HOLD}: held where it is")
            owner = live_owner(self._gitops(), workload, tc.target_id)
            if owner is not None and not self._git.writes(tc.image, tc.target_id):
                raise Owned(f"{where} is {not_live(owner)}")
            # The claim, read again after the workload: a newer digest claimed the target (or a
            # person held it) since this one did, and a patch now would roll it backwards (or
            # against the person). A claim made after this read patches after it: the
            # resourceVersion this patch carries then no longer matches (409), and this runs again.
            claim = self._state.targets.get(tc.target_id)
            if claim is None or claim.digest != tc.digest or claim.status is not TargetStatus.PENDING:
                return ("", ApplyOutcome.SUPERSEDED), None
            init = tc.container not in workload.containers
            current = (workload.init_containers if init else workload.containers).get(tc.container)
            if current is None:
                raise MissingContainer(f"{where} has no container {tc.container!r}")
            desired = pinned_image(current, tc.source, tc.digest)
            if current == desired:
                return (current, ApplyOutcome.ALREADY_CURRENT), None
            if owner is not None:  # written back through Git instead of patched
                return (current, ApplyOutcome.WRITE_BACK), None
            notes = tagpin_annotations(workload, tc.container, tc.digest, self._clock(), tc.trigger)
            body = image_patch(kind, workload.resource_version, tc.container, init, desired, notes)
            return (current, ApplyOutcome.PATCHED), body

        return patch_with_retries(workloads, kind, tc.namespace, tc.name, step, tc.target_id)

    def _finish(
        self, tc: TargetChange, status: TargetStatus, *, detail: str, previous: str | None = None
    ) -> None:
        self._state.targets.finish(
            tc.target_id,
            tc.digest,
            status,
            self._clock(),
            trigger=tc.trigger,
            detail=detail,
            previous_image=previous,
            correlation_id=tc.correlation_id,
        )


def _present(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if v is not None}
