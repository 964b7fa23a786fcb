"""Follow a rollout after the patch, and roll back a digest that fails.

The ``verifier`` function consumes the checks queue (``tagpin.checks``). A ``verify`` check reads
the workload and asks ``tagpin.health`` whether the rollout is complete, progressing or failed:

- complete: the target becomes ``verified`` (applied -> verified, conditional), its concurrency
  slot is released, and the promotion may move on (``tagpin.promote``);
- progressing, within ``rollout.verify_timeout_seconds``: the same check comes back after
  ``verify_interval_seconds`` (a delayed SQS message: nothing sleeps in a Lambda);
- failed (``ProgressDeadlineExceeded``) or timed out: the target becomes ``failed``, the digest is
  marked bad for the tag (so neither the poller, the webhook nor the reconciler applies it again
  until the tag moves to another digest), the promotion is halted, and every target of the tag
  that runs that digest gets its previous image back (``rolled_back``); one notification.

Every step is a conditional write, and a rollback interrupted half-way is finished by the retried
check (the failed target stays ``failed`` until its rollback is done), so at-least-once delivery
and concurrent checks are safe. A cluster that cannot be reached raises: the check is retried by
SQS and ends in the checks dead-letter queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tagpin.checks import Check, CheckQueue
from tagpin.config import FollowedImage, Kind, RolloutSettings, Target
from tagpin.health import Progress, evaluate
from tagpin.notify import Event, Notifier, RolloutEvent
from tagpin.promote import Promoter
from tagpin.rollout import NotFound, Workloads, restore
from tagpin.state import PromotionStatus, StateStore, TargetState, TargetStatus
from tagpin.waves import plan

logger = logging.getLogger(__name__)

ROLLBACK_FROM = frozenset(
    {TargetStatus.PENDING, TargetStatus.APPLIED, TargetStatus.VERIFIED, TargetStatus.FAILED}
)


def target_from_id(target_id: str) -> Target:
    cluster, namespace, kind, name, container = target_id.split("/")
    return Target(cluster=cluster, namespace=namespace, kind=Kind(kind), name=name, container=container)


class Verifier:
    def __init__(
        self,
        *,
        state: StateStore,
        workloads: Callable[[str], Workloads],
        followed: Callable[[], Mapping[str, FollowedImage]],
        settings: Callable[[], RolloutSettings],
        checks: CheckQueue,
        promoter: Promoter,
        notifier: Notifier | None,
        clock: Callable[[], int],
    ) -> None:
        self._state = state
        self._workloads = workloads
        self._followed = followed
        self._settings = settings
        self._checks = checks
        self._promoter = promoter
        self._notifier = notifier
        self._clock = clock

    def handle(self, check: Check) -> str:
        if check.kind == "verify":
            return self.verify(check)
        if check.kind == "advance":
            return self._promoter.evaluate(check.image, check.digest)
        return self._promoter.retry(check)

    def verify(self, check: Check) -> str:
        assert check.target_id is not None, "a verify check names its target"
        target = target_from_id(check.target_id)
        settings = self._settings()
        st = self._state.get_target(target.id)
        if st is None or st.digest != check.digest:
            self._release(target, check.digest, settings)
            return "superseded"
        if st.status is TargetStatus.FAILED:
            promotion = self._state.get_promotion(check.image)
            if promotion is not None and promotion.digest == check.digest:
                return self._roll_back(check, st.detail or "failed", settings, target.id)
            return "failed"
        if st.status is not TargetStatus.APPLIED:
            return st.status.value  # already decided by another check
        try:
            workload = self._workloads(target.cluster).get(target.namespace, target.kind, target.name)
        except NotFound:
            if self._state.finish_target(
                target.id,
                check.digest,
                TargetStatus.GONE,
                self._clock(),
                trigger=check.trigger or "verify",
                detail="the workload was deleted during its rollout",
                expected=frozenset({TargetStatus.APPLIED}),
            ):
                self._release(target, check.digest, settings)
                self._promoter.evaluate(check.image, check.digest)
            return "gone"
        running = workload.image_of(target.container) or ""
        if not running.endswith("@" + check.digest):
            # Changed by someone else since the patch: not this digest's fault. The reconciler
            # heals the target (and a new verification follows its patch).
            logger.warning(
                "the workload no longer runs the digest being verified",
                extra={"target": target.id, "digest": check.digest, "running": running},
            )
            self._release(target, check.digest, settings)
            return "changed"
        health = evaluate(target.kind, workload.generation, workload.spec, workload.status)
        now = self._clock()
        elapsed_s = (now - (check.applied_at or st.updated_at)) / 1000
        if health.progress is Progress.COMPLETE:
            if self._state.finish_target(
                target.id,
                check.digest,
                TargetStatus.VERIFIED,
                now,
                trigger=check.trigger or "verify",
                detail=f"{health.reason} ({elapsed_s:.1f} s after the patch)",
                correlation_id=check.correlation_id,
                expected=frozenset({TargetStatus.APPLIED}),
            ):
                logger.info(
                    "verified", extra={"target": target.id, "digest": check.digest, "after_s": elapsed_s}
                )
                self._release(target, check.digest, settings)
                self._promoter.evaluate(check.image, check.digest)
            return "verified"
        if health.progress is Progress.PROGRESSING and elapsed_s < settings.verify_timeout_seconds:
            self._checks.send(check.again(), settings.verify_interval_seconds)
            return f"progressing: {health.reason}"
        reason = (
            health.reason
            if health.progress is Progress.FAILED
            else f"not rolled out {settings.verify_timeout_seconds} s after the patch: {health.reason}"
        )
        if self._state.finish_target(
            target.id,
            check.digest,
            TargetStatus.FAILED,
            now,
            trigger=check.trigger or "verify",
            detail=reason,
            correlation_id=check.correlation_id,
            expected=frozenset({TargetStatus.APPLIED}),
        ):
            logger.error(
                "rollout failed", extra={"target": target.id, "digest": check.digest, "reason": reason}
            )
        return self._roll_back(check, reason, settings, target.id)

    def _roll_back(self, check: Check, reason: str, settings: RolloutSettings, culprit: str) -> str:
        """Mark the digest bad, halt its promotion, restore every target that runs it."""
        now = self._clock()
        image, digest = check.image, check.digest
        why = f"{culprit}: {reason}"
        self._state.mark_bad(image, digest, why, now)
        if self._state.end_promotion(image, digest, PromotionStatus.HALTED, now, why):
            self._state.image_event(image, digest, "failed", now, detail=why)
        followed = self._followed().get(image)
        targets = list(followed.targets) if followed is not None else [target_from_id(culprit)]
        states = self._state.get_targets([t.id for t in targets])
        restored: list[str] = []
        # The failing target last: until its own rollback is recorded it stays "failed", so a
        # retried check finishes a rollback that was interrupted half-way.
        targets.sort(key=lambda t: t.id == culprit)
        for target in targets:
            st = states.get(target.id)
            if st is None or st.digest != digest or st.status not in ROLLBACK_FROM:
                continue
            restored += self._restore(target, st, check, why, settings)
        if self._state.claim_notice(image, digest, "failed", self._clock()):
            event: Event = "rolled_back" if settings.rollback else "failed"
            self._state.image_event(
                image, digest, event, self._clock(), detail=why + "; restored: " + ", ".join(restored)
            )
            if self._notifier is not None:
                waves = plan(settings, targets)
                wave = next((w.name for w in waves if any(t.id == culprit for t in w.targets)), "?")
                self._notifier.send(
                    RolloutEvent(
                        event=event,
                        image=image,
                        digest=digest,
                        wave=wave,
                        targets=[culprit, *[t for t in restored if t != culprit]],
                        at=self._clock(),
                        detail=why,
                        trigger=check.trigger,
                        correlation_id=check.correlation_id,
                    )
                )
        return "rolled_back" if settings.rollback else "failed"

    def _restore(
        self, target: Target, st: TargetState, check: Check, why: str, settings: RolloutSettings
    ) -> list[str]:
        now = self._clock()
        status, detail = TargetStatus.FAILED, f"digest failed: {why}"
        if settings.rollback:
            outcome = restore(self._workloads(target.cluster), target, st.previous_image, check.digest, now)
            if outcome == "restored":
                status, detail = TargetStatus.ROLLED_BACK, f"restored {st.previous_image}; {why}"
            else:
                detail = f"not rolled back ({outcome}); {why}"
        changed = self._state.finish_target(
            target.id,
            check.digest,
            status,
            now,
            trigger="rollback",
            detail=detail,
            previous_image=st.previous_image,
            correlation_id=check.correlation_id,
            expected=ROLLBACK_FROM
            if status is TargetStatus.ROLLED_BACK
            else ROLLBACK_FROM - {TargetStatus.FAILED},
        )
        self._release(target, check.digest, settings)
        return [target.id] if changed and status is TargetStatus.ROLLED_BACK else []

    def _release(self, target: Target, digest: str, settings: RolloutSettings) -> None:
        if settings.max_concurrent_per_cluster:
            self._state.release_slot(target.cluster, target.id, digest)
