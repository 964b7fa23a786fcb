"""Apply a change: move every target of a tag to ``repo:tag@<digest>``, once per (target, digest).

``Applier.apply`` plans the waves, admits each target, records the decision once and patches:

1. admission of the move (``tagpin.usecases.admission``: superseded, bad digest); its promotion
   starts (or goes on), and a halted one stops it;
2. the waves of ``rollout.waves`` it has reached (admission's wave gate; ``tagpin.usecases.promote``
   advances them): only their targets are touched, a later wave's wait untouched and unreported;
3. each target's admission (approval, hold, platform, signature, window, slot), its decision
   recorded once (``tagpin.usecases.apply_record``);
4. each admitted target applied (``tagpin.usecases.apply_target``: claimed, its workload's gates
   asked, patched), through an idempotency guard (powertools on DynamoDB in the consumer) keyed on
   target and digest, so a duplicated or replayed message never rolls a workload twice.

With a verification queue, every patch is followed by a delayed ``verify`` verification
(``tagpin.usecases.verify``): the target is ``applied`` until the workload has rolled out
(``verified``) or failed (then it is rolled back and the digest marked bad for the tag).
``rollout.dry_run`` records the plan and patches nothing (``tagpin.usecases.dryrun``).

Failures split in two. Transient ones (cluster unreachable, 5xx, a conflict that outlasts the
retries) are raised, so the SQS record fails, is retried and ends in the dead-letter queue.
Permanent ones (the workload is gone, RBAC forbids the patch, the container does not exist) are
recorded on the target and reported without failing the message; neither kind is stored by the
idempotency guard, and the poller re-enqueues a target that is behind, so a fixed permission or a
workload created later heals by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from tagpin.domain.budget import UNLIMITED, Budget
from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage, GitOpsSettings, RolloutSettings, Target
from tagpin.domain.messages import Change, TargetChange, Verification, VerificationKind
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome, ApplyResult
from tagpin.ports.notify import Notifier, RolloutEventKind
from tagpin.ports.queues import VerificationQueue
from tagpin.ports.state import ImageEvent, ImageEventRecord, Promotion, PromotionStatus, State, TargetState
from tagpin.ports.workloads import WorkloadError, Workloads
from tagpin.usecases.admission import Admission, Known, Stage, standard
from tagpin.usecases.admission.slot import release_slot
from tagpin.usecases.admission.wave import reached as reached_wave
from tagpin.usecases.apply_record import Round, move_stopped
from tagpin.usecases.apply_target import TargetApplier, TargetNotApplied
from tagpin.usecases.approvals import Approvals
from tagpin.usecases.audit import Audit
from tagpin.usecases.dryrun import DryRun
from tagpin.usecases.gitroute import GitRoute
from tagpin.usecases.waves import PlannedWave, plan

if TYPE_CHECKING:
    from tagpin.usecases.promote import Promoter

logger = logging.getLogger(__name__)

# Wraps the one-target step so that a change with a ``TargetChange.key`` seen before (a duplicate or
# replayed message) is answered from the first result instead of rolled again.
ApplyTarget = Callable[[TargetChange], ApplyResult]
Guard = Callable[[ApplyTarget], ApplyTarget]


# A target's outcome that leaves it ``applied`` with a ``verify`` verification sent (TargetApplier).
LEFT_TO_VERIFY = frozenset({ApplyOutcome.PATCHED, ApplyOutcome.ALREADY_CURRENT})


class ChangeFailed(Exception):
    """At least one target failed transiently; the message must be retried."""


class Applier:
    def __init__(
        self,
        *,
        followed: Callable[[], Mapping[FollowedKey, FollowedImage]],
        state: State,
        workloads: Callable[[str], Workloads],
        clock: Callable[[], int],
        guard: Guard | None = None,
        settings: Callable[[], RolloutSettings] = RolloutSettings,
        verifications: VerificationQueue | None = None,
        promoter: Promoter | None = None,
        notifier: Notifier | None = None,
        approvals: Approvals | None = None,
        gitops: Callable[[], GitOpsSettings] = GitOpsSettings,
        admission: Admission | None = None,
        git: GitRoute | None = None,
    ) -> None:
        """Without ``verifications`` nothing is verified (``applied`` is final); without
        ``promoter`` waves do not advance by themselves; without ``admission`` tagpin's gates
        without their registry ports (no platform or signature gate)."""
        self._followed = followed
        self._state = state
        self._clock = clock
        self._settings = settings
        self._verifications = verifications
        self._promoter = promoter
        self._audit = Audit(state, notifier)
        self._approvals = approvals
        # owned targets gitops.write_back configures: moved through Git (tagpin.usecases.gitroute)
        self._git = git or GitRoute(gitops, None)
        self._admission = admission or standard(state=state, settings=settings, gitops=gitops)
        self._targets = TargetApplier(
            state=state,
            workloads=workloads,
            clock=clock,
            settings=settings,
            verifications=verifications,
            admission=self._admission,
            gitops=gitops,
            git=self._git,
        )
        self._dry = DryRun(state, self._admission, workloads)
        self._guard = guard

    def apply(self, change: Change, budget: Budget = UNLIMITED) -> list[ApplyResult]:
        """Apply ``change`` to every target it may touch now; a target is started only while
        ``budget`` lasts (the rest fail the change, so the queue delivers it again)."""
        move = change.move
        followed = self._followed().get(move.image)
        if followed is None:
            logger.info("change for an image no longer followed; nothing to do", extra={"image": move.image})
            return [ApplyResult(outcome=ApplyOutcome.NOT_FOLLOWED, image=move.image)]
        # The tag's state (a digest marked bad) and every target's (admission, ``_admit``): one
        # request, not a GetItem beside the index's Query and a BatchGetItem after the promotion's
        # start. Read before the start, as the tag was: the claims' conditions still decide.
        tag, states = self._state.targets.get_with_tag(move.image, [t.id for t in followed.targets])
        settings = self._settings()
        now = self._clock()
        stop = self._admission.decide_move(move, Known(tag=tag), now)
        if not stop.goes:
            return [move_stopped(move, stop)]
        waves = plan(settings, list(followed.targets))
        # The start and its STARTED history item: one transaction (both or neither, one request).
        promotion = self._state.promotions.start(
            move.image,
            move.digest,
            move.observed_at,
            now,
            trigger=move.trigger,
            correlation_id=move.correlation_id,
            dry_run=settings.dry_run,
            tag=move.tag,
            event=self._started(move, settings.dry_run, waves, now),
        )
        if promotion is None:
            return [ApplyResult(outcome=ApplyOutcome.SUPERSEDED, image=move.image)]
        if promotion.status is PromotionStatus.DRY_RUN:
            if not promotion.started:
                detail = "plan already recorded"
                return [ApplyResult(outcome=ApplyOutcome.PLANNED, image=move.image, detail=detail)]
            return self._dry.record(move, followed, waves, tag, promotion, self._clock())
        stop = self._admission.decide_move(move, Known(tag=tag, promotion=promotion), now)
        if not stop.goes:  # its promotion was halted
            return [move_stopped(move, stop)]
        # The waves the promotion has reached (a complete one heals every target): the wave gate
        # says which, as it does for every "would this roll?" (tagpin.usecases.admission.wave)
        reached = Known(followed=followed, promotion=promotion, waves=tuple(waves))
        active = [
            (wave, target)
            for wave in waves
            for target in wave.targets
            if self._admission.decide(move, target, replace(reached, wave=wave), now, Stage.WAVE).goes
        ]
        results, failed = self._admit(
            change, move, followed, promotion, active, states, settings, budget, now
        )
        if any(r.outcome is ApplyOutcome.PATCHED for r in results):
            last = reached_wave(move, promotion)
            wave = waves[len(waves) - 1 if last is None else min(last, len(waves) - 1)]
            self._audit.record(
                move,
                ImageEvent.APPLIED,
                now,
                once=f"applied_{wave.index}",
                detail=", ".join(t.id for t in wave.targets),
                wave=wave.name,
                announce=RolloutEventKind.APPLIED,
                targets=[t.id for t in wave.targets],
            )
        if self._promoter is not None:  # what it would read again is in hand (Promoter.evaluate)
            verifying = frozenset(r.target for r in results if r.target and r.outcome in LEFT_TO_VERIFY)
            self._promoter.evaluate(
                move.image, move.digest, in_hand=(promotion, followed), verifying=verifying
            )
        if failed:
            raise ChangeFailed("; ".join(failed))
        return results

    def _admit(
        self,
        change: Change,
        move: Move,
        followed: FollowedImage,
        promotion: Promotion,
        active: list[tuple[PlannedWave, Target]],
        states: Mapping[str, TargetState],
        settings: RolloutSettings,
        budget: Budget,
        now: int,
    ) -> tuple[list[ApplyResult], list[str]]:
        """Admit each target of the waves reached, record its decision, apply the admitted ones;
        a deferred one is tried again by one ``retry`` verification (the shortest wait). The
        results, and the transient failures that make the change fail. ``states``: the targets'
        states, read by ``apply``."""
        round_ = Round(self._state, self._audit, self._approvals, move, promotion)
        results: list[ApplyResult] = []
        git = self._git.batch(change, [t.id for _, t in active])
        for wave, target in active:
            if budget.exhausted():
                results.append(
                    round_.fail(target, "not started, out of time in this invocation", "out of time")
                )
                continue
            known = Known(followed=followed, wave=wave, state=states.get(target.id), promotion=promotion)
            decision = self._admission.decide(move, target, known, now, Stage.TARGET)
            result = round_.record(target, wave, known.state, decision, now)
            results.append(git.done(result or self._apply_one(change, target, settings, round_.failed)))
        git.flush()  # one write request per repository, each sent once its targets are decided
        if round_.deferred and self._verifications is not None:
            self._verifications.send(
                Verification(kind=VerificationKind.RETRY, move=move), min(round_.deferred)
            )
        return results, round_.failed

    @staticmethod
    def _started(move: Move, dry_run: bool, waves: list[PlannedWave], now: int) -> ImageEventRecord:
        """The image's history item of its promotion's start (written with it, if it starts)."""
        return ImageEventRecord(
            move.image,
            move.digest,
            ImageEvent.DRY_RUN_STARTED if dry_run else ImageEvent.STARTED,
            now,
            detail="waves: " + ", ".join(f"{w.name} ({len(w.targets)})" for w in waves if w.targets),
            trigger=move.trigger,
            correlation_id=move.correlation_id,
        )

    def _apply_one(
        self,
        change: Change,
        target: Target,
        settings: RolloutSettings,
        failed: list[str],
    ) -> ApplyResult:
        work = TargetChange.of(target, change.move, reconcile_run=change.reconcile_run)
        step = self.apply_target
        try:
            result = (self._guard(step) if self._guard else step)(work)
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
        if not (rolled and settings.verify and self._verifications is not None):
            release_slot(self._state, settings, target, change.move.digest)  # else the verifier does
        return result

    def apply_target(self, target_change: TargetChange) -> ApplyResult:
        """One target (``tagpin.usecases.apply_target``); the consumer's idempotency guard wraps it."""
        return self._targets.apply_target(target_change)
