"""Follow a rollout after the patch, and roll back a digest that fails.

The consumer runs it for each verification on the changes queue once it is due
(``tagpin.domain.messages.Verification``).
A ``verify`` verification reads the workload and its ``health`` (its kind's rule,
``tagpin.domain.kinds``): whether the rollout is complete, progressing or failed:

- complete: the target becomes ``verified`` (applied -> verified, conditional), its concurrency
  slot is released, and the promotion may move on (``tagpin.usecases.promote``);
- progressing, within ``rollout.verify_timeout_seconds``: the same verification comes back after
  ``verify_interval_seconds`` (a delayed message: nothing sleeps in a Lambda);
- paused (Argo Rollouts: a canary step, a blue-green promotion, a person's pause): not timed; it
  comes back after ``verify_interval_seconds`` for as long as a rollout may take
  (``verify_timeout_seconds``), then less and less often (each wait about doubles, up to 15
  minutes: ``pause_delay_s``), and a pause longer than ``rollout.max_pause_seconds``
  ends the chain: the target is recorded ``stalled`` and announced once, and nothing is rolled back
  or marked bad (a pause is a person's or the Rollout's own decision, not a failure);
- failed (``ProgressDeadlineExceeded``) or timed out: the target becomes ``failed``, the digest is
  marked bad for the tag (so neither the poller, the webhook nor the reconciler applies it again
  until the tag moves to another digest), the promotion is halted, and every target of the tag
  that runs that digest gets its previous image back (``rolled_back``); one notification.

Every step is a conditional write, and a rollback interrupted half-way is finished by the retried
verification (the failed target stays ``failed`` until its rollback is done), so at-least-once
delivery and concurrent verifications are safe. A cluster that cannot be reached raises: the
verification is retried by SQS and ends in the dead-letter queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage, Kind, RolloutSettings, Target
from tagpin.domain.messages import Trigger, Verification, VerificationKind
from tagpin.domain.outcomes import RestoreOutcome, VerificationOutcome, VerificationResult
from tagpin.ports.notify import Notifier, RolloutEventKind
from tagpin.ports.queues import MAX_DELAY_S, VerificationQueue
from tagpin.ports.state import ImageEvent, ImageEventRecord, PromotionStatus, State, TargetState, TargetStatus
from tagpin.ports.workloads import Health, NotFound, Progress, Workloads
from tagpin.usecases.admission.slot import release_slot
from tagpin.usecases.approvals import Approvals
from tagpin.usecases.audit import Audit
from tagpin.usecases.channels import mark_failed, marked_previous, return_to_previous
from tagpin.usecases.gitrevert import GitReverts
from tagpin.usecases.patch import restore
from tagpin.usecases.promote import Promoter
from tagpin.usecases.waves import plan

logger = logging.getLogger(__name__)

ROLLBACK_FROM = frozenset(
    {
        TargetStatus.PENDING,
        TargetStatus.APPLIED,
        TargetStatus.VERIFIED,
        TargetStatus.FAILED,
        TargetStatus.STALLED,  # it runs the failed digest too (another target of it failed)
    }
)
V = VerificationOutcome


def target_from_id(target_id: str) -> Target:
    cluster, namespace, kind, name, container = target_id.split("/")
    return Target(cluster=cluster, namespace=namespace, kind=Kind(kind), name=name, container=container)


class Verifier:
    def __init__(
        self,
        *,
        state: State,
        workloads: Callable[[str], Workloads],
        followed: Callable[[], Mapping[FollowedKey, FollowedImage]],
        settings: Callable[[], RolloutSettings],
        verifications: VerificationQueue,
        promoter: Promoter,
        notifier: Notifier | None,
        clock: Callable[[], int],
        approvals: Approvals | None = None,
        git: GitReverts | None = None,
    ) -> None:
        self._approvals = approvals
        self._git = git  # targets moved through Git: reverted through Git (docs/gitops.md)
        self._state = state
        self._workloads = workloads
        self._followed = followed
        self._settings = settings
        self._verifications = verifications
        self._promoter = promoter
        self._audit = Audit(state, notifier)
        self._clock = clock

    def handle(self, verification: Verification) -> VerificationResult:
        if verification.kind is VerificationKind.VERIFY:
            return self.verify(verification)
        if verification.kind is VerificationKind.ADVANCE:
            return self._promoter.evaluate(verification.move.image, verification.move.digest)
        if verification.kind is VerificationKind.EXPIRE:
            if self._approvals is None:
                return VerificationResult(V.ALREADY_DECIDED, "approvals are not wired here")
            return self._approvals.expire(verification)
        return self._promoter.retry(verification)

    def verify(self, verification: Verification) -> VerificationResult:
        assert verification.target_id is not None, "a verify verification names its target"
        digest = verification.move.digest
        target = target_from_id(verification.target_id)
        settings = self._settings()
        st = self._state.targets.get(target.id)
        if st is None or st.digest != digest:
            release_slot(self._state, settings, target, digest)
            return VerificationResult(V.SUPERSEDED)
        if st.status is TargetStatus.FAILED:
            promotion = self._state.promotions.get(verification.move.image)
            if promotion is not None and promotion.digest == digest:
                return self._roll_back(verification, st.detail or "failed", settings, target.id)
            return VerificationResult(V.FAILED, st.detail or "")
        if st.status is not TargetStatus.APPLIED:
            if st.status in (TargetStatus.VERIFIED, TargetStatus.GONE):
                # Decided by an earlier delivery, which may have died right after its write: what
                # follows it is done again (both are conditional writes, done once).
                release_slot(self._state, settings, target, digest)
                self._promoter.evaluate(verification.move.image, digest)
            return VerificationResult(V.ALREADY_DECIDED, st.status.value)
        trigger = verification.move.trigger
        try:
            workload = self._workloads(target.cluster).get(target.namespace, target.kind, target.name)
        except NotFound:
            if self._state.targets.finish(
                target.id,
                digest,
                TargetStatus.GONE,
                self._clock(),
                trigger=trigger,
                detail="the workload was deleted during its rollout",
                expected=frozenset({TargetStatus.APPLIED}),
            ):
                release_slot(self._state, settings, target, digest)
                self._promoter.evaluate(verification.move.image, digest)
            return VerificationResult(V.GONE)
        running = workload.image_of(target.container) or ""
        health = workload.health_since(verification.applied_at or st.updated_at)
        if not running.endswith("@" + digest) and verification.commit is not None:
            # moved by a commit: the GitOps tool has not applied it yet (timed as a rollout)
            health = Health(
                Progress.PROGRESSING, f"waiting for commit {verification.commit[:12]} to be applied"
            )
        elif not running.endswith("@" + digest):
            # Changed by someone else since the patch: not this digest's fault. The reconciler
            # heals the target (and a new verification follows its patch).
            logger.warning(
                "the workload no longer runs the digest being verified",
                extra={"target": target.id, "digest": digest, "running": running},
            )
            release_slot(self._state, settings, target, digest)
            return VerificationResult(V.CHANGED, running)
        now = self._clock()
        elapsed_s = (now - (verification.applied_at or st.updated_at)) / 1000
        if health.progress is Progress.COMPLETE:
            if self._state.targets.finish(
                target.id,
                digest,
                TargetStatus.VERIFIED,
                now,
                trigger=trigger,
                detail=f"{health.reason} ({elapsed_s:.1f} s after the patch)",
                correlation_id=verification.move.correlation_id,
                expected=frozenset({TargetStatus.APPLIED}),
            ):
                logger.info("verified", extra={"target": target.id, "digest": digest, "after_s": elapsed_s})
                release_slot(self._state, settings, target, digest)
                self._promoter.evaluate(verification.move.image, digest)
                return VerificationResult(V.VERIFIED, health.reason)
            return VerificationResult(V.ALREADY_DECIDED, "verified by another verification")
        if health.progress is Progress.PAUSED:
            # Held at a pause step (Argo Rollouts: a canary step, a promotion to wait for, a
            # person's pause): not a failure, and not timed; the timeout counts from its end.
            pause_began = verification.pause_started(now)
            if now - pause_began >= settings.max_pause_seconds * 1000:
                return self._stall(verification, target, health.reason, pause_began, settings)
            self._verifications.send(verification.paused(now), pause_delay_s(settings, now - pause_began))
            return VerificationResult(V.PAUSED, health.reason)
        waited_s = (now - verification.timed_from(st.updated_at)) / 1000
        if health.progress is Progress.PROGRESSING and waited_s < settings.verify_timeout_seconds:
            self._verifications.send(verification.again(), settings.verify_interval_seconds)
            return VerificationResult(V.PROGRESSING, health.reason)
        since = "the patch" if verification.paused_at is None else "its last pause"
        reason = (
            health.reason
            if health.progress is Progress.FAILED
            else f"not rolled out {settings.verify_timeout_seconds} s after {since}: {health.reason}"
        )
        if self._state.targets.finish(
            target.id,
            digest,
            TargetStatus.FAILED,
            now,
            trigger=trigger,
            detail=reason,
            correlation_id=verification.move.correlation_id,
            expected=frozenset({TargetStatus.APPLIED}),
        ):
            logger.error("rollout failed", extra={"target": target.id, "digest": digest, "reason": reason})
        return self._roll_back(verification, reason, settings, target.id)

    def _stall(
        self, verification: Verification, target: Target, reason: str, since: int, settings: RolloutSettings
    ) -> VerificationResult:
        """A pause longer than ``max_pause_seconds``: recorded and announced once, then no more
        verifications. Nothing is rolled back nor marked bad, and the promotion is not halted: its
        wave is not verified, so it waits; the tag's next digest supersedes it as usual."""
        now = self._clock()
        image, digest = verification.move.image, verification.move.digest
        hours = (now - since) / 3_600_000
        why = (
            f"stalled: paused for {hours:.1f} h ({reason}), longer than rollout.max_pause_seconds "
            f"({settings.max_pause_seconds} s): no longer followed, not rolled back; promote or "
            "abort the rollout, the tag's next digest rolls as usual"
        )
        followed = self._followed().get(image)
        waves = plan(settings, list(followed.targets) if followed is not None else [target])
        # Announced first (once per target and digest), then the state: a retry after a failure
        # between the two finds the target still applied and finishes it without a second notice.
        self._audit.record(
            verification.move,
            ImageEvent.STALLED,
            now,
            once=f"stalled_{target.id}",
            detail=f"{target.id}: {why}",
            wave=next((w.name for w in waves if any(t.id == target.id for t in w.targets)), "?"),
            announce=RolloutEventKind.STALLED,
            targets=[target.id],
            message=why,
        )
        if self._state.targets.finish(
            target.id,
            digest,
            TargetStatus.STALLED,
            now,
            trigger=verification.move.trigger,
            detail=why,
            correlation_id=verification.move.correlation_id,
            expected=frozenset({TargetStatus.APPLIED}),
        ):
            logger.warning("rollout stalled", extra={"target": target.id, "digest": digest, "reason": why})
            release_slot(self._state, settings, target, digest)
        return VerificationResult(V.STALLED, why)

    def _roll_back(
        self, verification: Verification, reason: str, settings: RolloutSettings, culprit: str
    ) -> VerificationResult:
        """Mark the digest bad, halt its promotion, restore every target that runs it."""
        now = self._clock()
        image, digest = verification.move.image, verification.move.digest
        why = f"{culprit}: {reason}"
        self._state.tags.mark_bad(image, digest, why, now)
        mark_failed(self._state, image, digest, why, now)  # a version channel's: marked bad first
        # The halt and its FAILED item: one write, so a retry after a crash finds both or neither.
        failed = ImageEventRecord(image, digest, ImageEvent.FAILED, now, detail=why)
        self._state.promotions.end(image, digest, PromotionStatus.HALTED, now, why, event=failed)
        followed = self._followed().get(image)
        targets = list(followed.targets) if followed is not None else [target_from_id(culprit)]
        states = self._state.targets.get_many([t.id for t in targets])
        kept = marked_previous(self._state, followed)  # after mark_failed: never back to a bad version
        # The failing target last: until its own rollback is recorded it stays "failed", so a
        # retried verification finishes a rollback that was interrupted half-way.
        targets.sort(key=lambda t: t.id == culprit)
        for target in targets:
            st = states.get(target.id)
            if st is None or st.digest != digest or st.status not in ROLLBACK_FROM:
                continue
            self._restore(target, st, verification, why, settings, kept(st.previous_image))
        waves = plan(settings, targets)
        # "rolled back" only when something was: a target left to Argo Rollouts' own abort, or
        # with nothing to restore, failed and stays as it is. Read again, not taken from this
        # call's own writes: a concurrent rollback of the same digest (two targets failing at
        # once) or an earlier attempt of this one may have restored them.
        after = self._state.targets.get_many([t.id for t in targets])
        restored = sorted(
            target_id
            for target_id, st in after.items()
            if st.digest == digest and st.status is TargetStatus.ROLLED_BACK
        )
        rolled_back = settings.rollback and bool(restored)
        # A version channel whose targets were rolled back returns to the version before.
        back = return_to_previous(self._state, followed, digest, self._clock()) if rolled_back else None
        self._audit.record(
            verification.move,
            ImageEvent.ROLLED_BACK if rolled_back else ImageEvent.FAILED,
            self._clock(),
            once="failed",
            detail=why
            + "; restored: "
            + (", ".join(restored) or "none")
            + ("" if back is None else f"; the channel is back on {back}"),
            wave=next((w.name for w in waves if any(t.id == culprit for t in w.targets)), "?"),
            announce=RolloutEventKind.ROLLED_BACK if rolled_back else RolloutEventKind.FAILED,
            targets=[culprit, *[t for t in restored if t != culprit]],
            message=why,
        )
        return VerificationResult(V.ROLLED_BACK if rolled_back else V.FAILED, why)

    def _restore(
        self,
        target: Target,
        st: TargetState,
        verification: Verification,
        why: str,
        settings: RolloutSettings,
        marked: str | None,
        again: bool = True,
    ) -> None:
        """``marked``: why the image the target ran before must not go back on (a version marked
        bad: a person held it back, ``tagpin downgrade``): then it is not rolled back, as when
        nothing was replaced (the target stays ``failed``; the channel stays blocked too).

        A target found not running the digest (``NOT_RUNNING``) is recorded ``failed`` only over
        the state that read began from: a consumer's PATCH of the digest may land after that read
        (the claim was ``pending``) and record ``applied`` before this write; then the target runs
        the bad digest, and it is decided ``again`` (once) from what it runs now, instead of
        ``failed`` written over ``applied`` and the bad digest left running. (A PATCH whose
        ``applied`` comes after this ``failed`` puts its image back itself:
        ``apply_target._undo_failed``.)"""
        now = self._clock()
        status, detail = TargetStatus.FAILED, f"digest failed: {why}"
        outcome: RestoreOutcome | None = None
        git = None
        if settings.rollback and marked is not None:
            detail = f"not rolled back to {st.previous_image}: {marked}; {why}"
        elif settings.rollback and self._git is not None:  # moved through Git: reverted through Git
            git = self._git.restore(
                self._workloads(target.cluster),
                target,
                st,
                verification.move.image,
                why,
                verification.move.correlation_id,
            )
        if git is not None:
            detail = git
        elif settings.rollback and marked is None:
            outcome = restore(
                self._workloads(target.cluster),
                target,
                st.previous_image,
                verification.move.digest,
                now,
                stop=lambda: self._held(target),
            )
            if outcome is RestoreOutcome.RESTORED:
                status, detail = TargetStatus.ROLLED_BACK, f"restored {st.previous_image}; {why}"
            else:
                detail = f"not rolled back ({outcome.value}); {why}"
        read = outcome is RestoreOutcome.NOT_RUNNING and st.status is not TargetStatus.FAILED
        expected = (
            ROLLBACK_FROM if status is TargetStatus.ROLLED_BACK else ROLLBACK_FROM - {TargetStatus.FAILED}
        )
        written = self._state.targets.finish(
            target.id,
            verification.move.digest,
            status,
            now,
            trigger=Trigger.ROLLBACK,
            detail=detail,
            previous_image=st.previous_image,
            correlation_id=verification.move.correlation_id,
            expected=frozenset({st.status}) if read else expected,
        )
        moved = None if written or not (read and again) else self._state.targets.get(target.id)
        if moved is not None and moved.digest == st.digest and moved.status in ROLLBACK_FROM - {st.status}:
            logger.info("the digest landed after the rollback's read", extra={"target": target.id})
            return self._restore(target, moved, verification, why, settings, marked, again=False)
        release_slot(self._state, settings, target, verification.move.digest)

    def _held(self, target: Target) -> RestoreOutcome | None:
        """``HELD`` if a person holds the target now (a rollback's put-back stops there)."""
        state = self._state.targets.get(target.id)
        return RestoreOutcome.HELD if state is not None and state.status is TargetStatus.HELD else None


def pause_delay_s(settings: RolloutSettings, paused_ms: int) -> int:
    """When to look again at a rollout paused for ``paused_ms``. A pause as long as a rollout may
    take (``verify_timeout_seconds``: a canary step's own duration) is followed as closely as a
    rollout, every ``verify_interval_seconds``; past that (a person's pause, a promotion nobody
    made yet) each wait is as long as the time since (so it about doubles), at least the interval,
    at most 15 minutes; never past ``max_pause_seconds`` (the stall is recorded on time)."""
    paused_s = paused_ms // 1000
    beyond = paused_s - settings.verify_timeout_seconds
    interval = settings.verify_interval_seconds
    delay = interval if beyond < 0 else min(MAX_DELAY_S, max(interval, beyond))
    return max(1, min(delay, settings.max_pause_seconds - paused_s))
