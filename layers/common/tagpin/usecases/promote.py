"""Promotion through the waves: when the active wave is verified, soak, then start the next.

A promotion (``tagpin.ports.state.Promotions``, ``ROLLOUT#<tag>``) belongs to the tag's newest
digest; a newer digest replaces it (the older one stops advancing; targets it already patched keep
being verified and are patched again as the newer digest reaches their wave). Each step is a
conditional write, so duplicate verifications and concurrent consumers advance a promotion exactly
once:

1. every target of the active wave is ``verified`` (or skipped: paused, gone) -> the wave is
   verified (soak starts; one ``verified`` notification);
2. the soak has passed -> the promotion moves to the next wave and a change for it is sent on the
   FIFO changes queue (the consumer applies it like any other change); before that, a delayed
   ``advance`` verification comes back when the soak ends;
3. no later wave has targets -> the promotion is complete.

``evaluate`` is total: every stored promotion (whatever its wave index, even past the waves the
current plan has) and every wave plan gives an answer, never an exception. A failure halts the
promotion (``tagpin.usecases.verify``); a deferred target is retried by re-sending the change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage, RolloutSettings
from tagpin.domain.messages import Change, Trigger, Verification, VerificationKind
from tagpin.domain.outcomes import VerificationOutcome, VerificationResult
from tagpin.domain.refs import Digest
from tagpin.ports.notify import Notifier, RolloutEventKind
from tagpin.ports.queues import MAX_DELAY_S, ChangeQueue, VerificationQueue
from tagpin.ports.state import (
    ImageEvent,
    ImageEventRecord,
    Promotion,
    PromotionStatus,
    State,
    TargetState,
    TargetStatus,
)
from tagpin.usecases.audit import Audit, move_of
from tagpin.usecases.waves import PlannedWave, plan

logger = logging.getLogger(__name__)

SKIPPED = frozenset({TargetStatus.PAUSED, TargetStatus.GONE, TargetStatus.OWNED})


def done(st: TargetState | None, digest: Digest, verify: bool) -> bool:
    """Does this target hold up its wave no longer?"""
    if st is None or st.digest != digest:
        return False
    if st.status is TargetStatus.VERIFIED or st.status in SKIPPED:
        return True
    return st.status is TargetStatus.APPLIED and not verify


def next_wave(waves: list[PlannedWave], index: int) -> PlannedWave | None:
    """The first wave after ``index`` that has targets: None when nothing is left to promote."""
    return next((w for w in waves[index + 1 :] if w.targets), None)


class Promoter:
    def __init__(
        self,
        *,
        state: State,
        followed: Callable[[], Mapping[FollowedKey, FollowedImage]],
        settings: Callable[[], RolloutSettings],
        verifications: VerificationQueue,
        changes: ChangeQueue,
        notifier: Notifier | None,
        clock: Callable[[], int],
    ) -> None:
        self._state = state
        self._followed = followed
        self._settings = settings
        self._verifications = verifications
        self._changes = changes
        self._audit = Audit(state, notifier)
        self._clock = clock

    def evaluate(
        self,
        image: FollowedKey,
        digest: Digest,
        *,
        in_hand: tuple[Promotion, FollowedImage] | None = None,
        verifying: frozenset[str] = frozenset(),
    ) -> VerificationResult:
        """Move the promotion of ``digest`` on as far as it may go now; say where it stands.

        The consumer's change passes what it read or wrote a moment before: ``in_hand``, the
        promotion and the followed tag, not read again while its active wave is not verified yet
        (the only step then is ``wave_verified``, a write conditional on the stored digest, wave
        and status: an in-hand promotion older than the stored one only races); and
        ``verifying``, the targets it has just left to a verification (``applied``, not verified
        yet): with ``rollout.verify`` a wave holding one is waiting, and that verification's own
        evaluation moves the promotion on once it is verified."""
        promotion, followed = in_hand if in_hand is not None else (None, None)
        if promotion is None or promotion.wave_verified_at is not None:  # soak, advance, complete: read
            promotion = self._state.promotions.get(image)
        if promotion is None or promotion.digest != digest or promotion.status is not PromotionStatus.ROLLING:
            return VerificationResult(VerificationOutcome.NOT_ROLLING)
        followed = followed or self._followed().get(image)
        if followed is None:
            return VerificationResult(VerificationOutcome.NOT_FOLLOWED)
        settings = self._settings()
        waves = plan(settings, list(followed.targets))
        # A stored wave index past the plan (waves removed from the configuration since) is the last.
        index = min(promotion.wave, len(waves) - 1)
        wave = waves[index]
        now = self._clock()
        verified_at = promotion.wave_verified_at
        following = next_wave(waves, index)
        if verified_at is None and settings.verify and any(t.id in verifying for t in wave.targets):
            return VerificationResult(VerificationOutcome.WAITING, f"wave {wave.name}: being verified")
        if verified_at is None:
            states = self._state.targets.get_many([t.id for t in wave.targets])
            waiting = [t.id for t in wave.targets if not done(states.get(t.id), digest, settings.verify)]
            if waiting:
                return VerificationResult(
                    VerificationOutcome.WAITING,
                    f"wave {wave.name}: {len(waiting)} target(s) not verified yet",
                )
            # The soak's start and the wave's VERIFIED item: one write, announced after it (once:
            # only one caller's wave_verified is written).
            targets = [t.id for t in wave.targets]
            verified = self._audit.item(
                move_of(promotion), ImageEvent.VERIFIED, now, detail=", ".join(targets), wave=wave.name
            )
            if not self._state.promotions.wave_verified(
                image, digest, promotion.wave, now, event=verified if targets else None
            ):
                return VerificationResult(VerificationOutcome.RACED)
            verified_at = now
            if targets:
                self._audit.announce(
                    move_of(promotion),
                    RolloutEventKind.VERIFIED,
                    now,
                    wave=wave.name,
                    targets=targets,
                    complete=following is None,
                )
        if following is None:
            # The last wave with targets is verified (now, or by an earlier call that did not get
            # to complete it): nothing is left to promote.
            # The end and its COMPLETE item: one write (a retry after a crash finds both or neither).
            complete = ImageEventRecord(image, digest, ImageEvent.COMPLETE, now)
            self._state.promotions.end(
                image, digest, PromotionStatus.COMPLETE, now, "every wave verified", event=complete
            )
            return VerificationResult(VerificationOutcome.COMPLETE)
        return self._after_soak(promotion, wave, following, verified_at, settings, now)

    def _after_soak(
        self,
        promotion: Promotion,
        wave: PlannedWave,
        following: PlannedWave,
        verified_at: int,
        settings: RolloutSettings,
        now: int,
    ) -> VerificationResult:
        image, digest = promotion.image, Digest(promotion.digest)
        soak_ms = settings.soak_after(wave.wave) * 1000 if wave.targets else 0
        remaining_ms = verified_at + soak_ms - now
        if remaining_ms > 0:
            self._verifications.send(
                Verification(kind=VerificationKind.ADVANCE, move=move_of(promotion)),
                min(MAX_DELAY_S, -(-remaining_ms // 1000)),
            )
            return VerificationResult(
                VerificationOutcome.SOAKING, f"wave {wave.name}: {remaining_ms / 1000:.0f} s left"
            )
        # Waves without targets in between are passed over: the promotion moves to ``following``.
        # The move and its WAVE_STARTED item: one write (a retry after a crash finds both or neither).
        started = ImageEventRecord(image, digest, ImageEvent.WAVE_STARTED, now, wave=following.name)
        if not self._state.promotions.advance(
            image, digest, promotion.wave, now, following.index, event=started
        ):
            return VerificationResult(VerificationOutcome.RACED)
        logger.info("promoting", extra={"image": image, "digest": digest, "wave": following.name})
        self._changes.send(
            Change(move=move_of(promotion).by(Trigger.PROMOTE), round=f"wave-{following.index}")
        )
        return VerificationResult(VerificationOutcome.WAVE_STARTED, following.name)

    def retry(self, verification: Verification) -> VerificationResult:
        """A deferred rollout: send the change again (the consumer decides again)."""
        promotion = self._state.promotions.get(verification.move.image)
        if (
            promotion is None
            or promotion.digest != verification.move.digest
            or promotion.status is not PromotionStatus.ROLLING
        ):
            return VerificationResult(VerificationOutcome.NOT_ROLLING)
        self._changes.send(
            Change(move=move_of(promotion).by(Trigger.PROMOTE), round=f"retry-{self._clock()}")
        )
        return VerificationResult(VerificationOutcome.RESENT)
