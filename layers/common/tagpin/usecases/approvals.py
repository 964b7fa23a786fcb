"""Approvals: a person decides before a digest starts a wave (``rollout.waves[].approval``) or any
wave of an image (``images[].approval``). docs/approvals.md.

- **Request.** When a change reaches a wave that needs approval, the consumer does not patch it:
  the promotion records the waiting wave (``awaiting_approval``, conditional: once), the request is
  announced (SNS, chat and HTTP webhooks; Slack with Approve / Reject buttons), and an ``expire``
  verification is scheduled for when it lapses (sent again by a change that finds it made).
- **ApprovalOutcome.** ``decide`` (the CLI, the console, Slack): a conditional write on the promotion's
  digest and waiting wave, so a double click decides once, an old digest's approval after a newer
  one arrived does nothing and says so, and a lapsed request cannot be approved. Every decision is
  recorded with who, when, through what and for which digest. An approval sends the change again
  for the approved wave: it goes through every other gate (trust gates, maintenance windows, the
  concurrency limit) like any change; approval never bypasses them. A rejection halts the
  promotion and marks the digest bad, as a rollback does (a version channel's version too).
- **Lapse.** Unanswered by ``rollout.approval_expires_seconds``: the promotion is halted, recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from tagpin.domain.channels import ChannelKey, FollowedKey
from tagpin.domain.config import FollowedImage, RolloutSettings
from tagpin.domain.messages import Change, Trigger, Verification, VerificationKind
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import VerificationOutcome, VerificationResult
from tagpin.domain.refs import Digest
from tagpin.ports.notify import Notifier, RolloutEventKind
from tagpin.ports.queues import MAX_DELAY_S, ChangeQueue, VerificationQueue
from tagpin.ports.state import BadVersion, ImageEvent, Promotion, State
from tagpin.usecases.audit import Audit, move_of
from tagpin.usecases.waves import PlannedWave, plan

logger = logging.getLogger(__name__)


class ApprovalOutcome(StrEnum):
    """What a person's approval or rejection did (admission's ``Decision`` is a gate's answer)."""

    APPROVED = "approved"
    REJECTED = "rejected"
    NOTHING_WAITING = "nothing-waiting"  # no wave of this image waits for a decision
    STALE = "stale"  # the decision names an older digest: a newer one supersedes it
    ALREADY_DECIDED = "already-decided"  # a double click, or the request lapsed meanwhile


class Via(StrEnum):
    """Where a person decided: recorded with the decision (``approved by ana via slack``)."""

    CLI = "cli"
    CONSOLE = "console"
    SLACK = "slack"


@dataclass(frozen=True)
class Decided:
    decision: ApprovalOutcome
    image: FollowedKey
    digest: Digest | None = None
    wave: str | None = None
    detail: str = ""


def asker(change: Move) -> str:
    """Which change asked for an approval (``Promotion.approval_asked_by``): the same message
    delivered again gives the same text; another change of the digest (a poll's, a webhook's, a
    reconcile run's: each its own trigger, observation and correlation id) another."""
    return f"{change.trigger}@{change.observed_at}#{change.correlation_id or ''}"


def expire_delay(expires_at: int, now: int) -> int:
    """Seconds until an ``expire`` check of a request lapsing at ``expires_at`` is due: rounded up,
    at most ``MAX_DELAY_S`` (SQS's longest delay: a later expiry is checked again then), 0 when past."""
    return max(0, min(MAX_DELAY_S, -(-(expires_at - now) // 1000)))


class Approvals:
    def __init__(
        self,
        *,
        state: State,
        settings: Callable[[], RolloutSettings],
        changes: ChangeQueue,
        verifications: VerificationQueue,
        notifier: Notifier | None,
        clock: Callable[[], int],
    ) -> None:
        self._state = state
        self._settings = settings
        self._changes = changes
        self._verifications = verifications
        self._audit = Audit(state, notifier)
        self._clock = clock

    def request(self, change: Move, promotion: Promotion, wave: PlannedWave) -> bool:
        """Wave ``wave`` waits for ``change``'s approval (recorded and announced once; admission's
        approval gate decided it waits): True when asked now."""
        now = self._clock()
        expires_at = now + self._settings().approval_expires_seconds * 1000
        version = f" (version {change.tag})" if change.tag else ""
        detail = f"wave {wave.name}{version}: waiting for a person until {expires_at}"
        asked = self._audit.item(change, ImageEvent.AWAITING_APPROVAL, now, detail=detail, wave=wave.name)
        # The request and its item: one write; announced after it (once: the request's condition).
        if not self._state.promotions.request_approval(
            change.image, change.digest, wave.index, now, expires_at, event=asked, asked_by=asker(change)
        ):
            self._expire_again(change, wave, now)
            return False
        self._audit.announce(
            change,
            RolloutEventKind.AWAITING_APPROVAL,
            now,
            wave=wave.name,
            targets=[t.id for t in wave.targets],
            extra={"wave_index": wave.index, "expires_at": expires_at, "tag": change.tag or ""},
        )
        self._send_expire(change, wave.index, expires_at, now)
        logger.info(
            "waiting for approval", extra={"image": change.image, "digest": change.digest, "wave": wave.name}
        )
        return True

    def _expire_again(self, change: Move, wave: PlannedWave, now: int) -> None:
        """The request was made already. The write and the ``expire``'s send are two services
        (DynamoDB, SQS): a consumer that stopped between them left a request that never lapses,
        and its change, delivered again (its message is deleted only once it succeeds), finds it
        made. So when the change that asked comes back (``asker``) while this wave of this digest
        still waits, its ``expire`` is sent again, for the request's own expiry; not announced
        again. Anything else sends nothing: decided, lapsed, another digest or wave, and another
        change, such as the reconciler's healing change of the waiting wave's targets every run
        (each would start one more chain of ``expire`` messages, every 15 minutes until the
        request's expiry). An ``expire`` twice is safe: each reads the request again and its lapse
        is conditional (one lapses it, the others find it decided)."""
        promotion = self._state.promotions.get(change.image)
        if (
            promotion is None
            or promotion.digest != change.digest
            or not promotion.awaiting_approval
            or promotion.awaiting_wave != wave.index
            or promotion.approval_expires_at is None
            or promotion.approval_asked_by != asker(change)
        ):
            return
        self._send_expire(change, wave.index, promotion.approval_expires_at, now)
        logger.info(
            "approval request's expiry sent again",
            extra={"image": change.image, "digest": change.digest, "wave": wave.name},
        )

    def _send_expire(self, change: Move, wave: int, expires_at: int, now: int) -> None:
        """The ``expire`` of wave ``wave``'s request, due at ``expires_at`` (at most ``MAX_DELAY_S``
        away: ``expire`` sends itself again while not due; now, when past)."""
        self._verifications.send(
            Verification(kind=VerificationKind.EXPIRE, move=change, attempt=wave),
            expire_delay(expires_at, now),
        )

    def decide(
        self,
        image: FollowedKey,
        approve: bool,
        who: str,
        via: Via,
        digest: Digest | None = None,
        wave: str | None = None,
    ) -> Decided:
        """A person's decision on the wave of ``image`` waiting now (for ``digest``, and the wave
        named ``wave``, when given: a Slack button names the request it was posted with): the one
        way the CLI, the console and Slack approve or reject."""
        promotion = self._state.promotions.get(image)
        if promotion is None or not promotion.awaiting_approval:
            waiting_for = None if promotion is None else promotion.digest
            if digest is not None and waiting_for is not None and digest != waiting_for:
                return Decided(
                    ApprovalOutcome.STALE, image, digest, detail=f"a newer digest {waiting_for} supersedes it"
                )
            return Decided(
                ApprovalOutcome.NOTHING_WAITING, image, digest, detail="no wave waits for a decision"
            )
        if digest is not None and digest != promotion.digest:
            return Decided(
                ApprovalOutcome.STALE,
                image,
                digest,
                detail=f"a newer digest {promotion.digest} supersedes it: nothing done",
            )
        assert promotion.awaiting_wave is not None
        waiting = self._wave(promotion.awaiting_wave)
        if wave is not None and wave != waiting:  # an earlier request's button: that one was decided
            detail = f"wave {wave} was decided already; wave {waiting} waits for its own decision"
            return Decided(ApprovalOutcome.ALREADY_DECIDED, image, promotion.digest, wave, detail)
        wave = waiting
        now = self._clock()
        verb = "approved" if approve else "rejected"
        detail = f"{verb} by {who} via {via}"
        move = move_of(promotion).by(Trigger.MANUAL)
        event = ImageEvent.APPROVED if approve else ImageEvent.REJECTED
        decided = self._audit.item(move, event, now, detail=f"wave {wave}: {detail}", wave=wave)
        if not self._state.promotions.decide_approval(
            image, promotion.digest, promotion.awaiting_wave, approve, now, detail, event=decided
        ):
            return Decided(
                ApprovalOutcome.ALREADY_DECIDED, image, promotion.digest, wave, "decided already, or lapsed"
            )
        kind = RolloutEventKind.APPROVED if approve else RolloutEventKind.REJECTED
        self._audit.announce(move, kind, now, wave=wave, message=detail)
        if approve:
            self._changes.send(
                Change(
                    move=move_of(promotion).by(Trigger.MANUAL), round=f"approved-{promotion.awaiting_wave}"
                )
            )
            return Decided(ApprovalOutcome.APPROVED, image, promotion.digest, wave, detail)
        self._reject(image, promotion, detail, now)
        return Decided(ApprovalOutcome.REJECTED, image, promotion.digest, wave, detail)

    def expire(self, verification: Verification) -> VerificationResult:
        """The ``expire`` verification: the request lapses if still unanswered at its time."""
        promotion = self._state.promotions.get(verification.move.image)
        if (
            promotion is None
            or promotion.digest != verification.move.digest
            or promotion.awaiting_wave != verification.attempt
            or promotion.approval_expires_at is None
        ):
            return VerificationResult(VerificationOutcome.ALREADY_DECIDED)
        now = self._clock()
        if promotion.approval_expires_at > now:  # a long request: wait again
            self._verifications.send(verification, expire_delay(promotion.approval_expires_at, now))
            return VerificationResult(VerificationOutcome.SOAKING, "the approval request is still open")
        wave = self._wave(verification.attempt)
        move, detail = verification.move.by(Trigger.MANUAL), f"wave {wave}: nobody decided; nothing rolled"
        lapsed = self._audit.item(move, ImageEvent.LAPSED, now, detail=detail, wave=wave)
        if not self._state.promotions.lapse_approval(
            verification.move.image, verification.move.digest, verification.attempt, now, event=lapsed
        ):
            return VerificationResult(VerificationOutcome.ALREADY_DECIDED)
        return VerificationResult(VerificationOutcome.FAILED, "the approval request lapsed")

    def awaiting_targets(self, followed: FollowedImage) -> frozenset[str]:
        """The targets of the wave of ``followed`` that waits for a person's approval now."""
        promotion = self._state.promotions.get(followed.image)
        if promotion is None or not promotion.awaiting_approval or promotion.awaiting_wave is None:
            return frozenset()
        waves = plan(self._settings(), list(followed.targets))
        index = promotion.awaiting_wave
        return frozenset(t.id for t in waves[index].targets) if index < len(waves) else frozenset()

    def wave_name(self, index: int) -> str:
        """The name of wave ``index`` (a promotion's ``awaiting_wave``)."""
        return self._wave(index)

    def _wave(self, index: int) -> str:
        """A wave's name by its index: the configuration's, whatever the targets (``plan`` keeps
        indices stable), so nothing of the image is read."""
        waves = plan(self._settings(), [])
        return waves[index].name if index < len(waves) else str(index)

    def _reject(self, image: FollowedKey, promotion: Promotion, detail: str, now: int) -> None:
        """A rejected digest is marked bad, as a rolled-back one: nothing applies it until the tag
        moves; a version channel's version is never chosen again until cleared."""
        self._state.tags.mark_bad(image, promotion.digest, detail, now)
        channel = ChannelKey.parse(image)
        if channel is not None and promotion.tag:
            self._state.versions.mark_bad(
                str(channel.repository), BadVersion(promotion.tag, promotion.digest, detail, now)
            )
