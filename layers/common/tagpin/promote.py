"""Promotion through the waves: when the active wave is verified, soak, then start the next.

A promotion (``StateStore`` ``ROLLOUT#<tag>``) belongs to the tag's newest digest; a newer digest
replaces it (the older one stops advancing; targets it already patched keep being verified and
are patched again as the newer digest reaches their wave). Each step is a conditional write, so
duplicate checks and concurrent consumers advance a promotion exactly once:

1. every target of the active wave is ``verified`` (or skipped: paused, gone) -> the wave is
   verified (soak starts; one ``verified`` notification);
2. the soak has passed -> the promotion moves to the next wave and a change for it is sent on the
   FIFO changes queue (the consumer applies it like any other change); before that, a delayed
   ``advance`` check comes back when the soak ends;
3. the last wave verified -> the promotion is complete.

A failure halts the promotion (``tagpin.verify``); a deferred target is retried by re-sending
the change (``retry``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tagpin.checks import MAX_DELAY_S, Check, CheckQueue
from tagpin.config import FollowedImage, RolloutSettings
from tagpin.models import Change
from tagpin.notify import Notifier, RolloutEvent
from tagpin.queue import ChangeQueue
from tagpin.state import PromotionStatus, StateStore, TargetState, TargetStatus
from tagpin.waves import plan

logger = logging.getLogger(__name__)

SKIPPED = frozenset({TargetStatus.PAUSED, TargetStatus.GONE})


def done(st: TargetState | None, digest: str, verify: bool) -> bool:
    """Does this target hold up its wave no longer?"""
    if st is None or st.digest != digest:
        return False
    if st.status is TargetStatus.VERIFIED or st.status in SKIPPED:
        return True
    return st.status is TargetStatus.APPLIED and not verify


class Promoter:
    def __init__(
        self,
        *,
        state: StateStore,
        followed: Callable[[], Mapping[str, FollowedImage]],
        settings: Callable[[], RolloutSettings],
        checks: CheckQueue,
        changes: ChangeQueue,
        notifier: Notifier | None,
        clock: Callable[[], int],
    ) -> None:
        self._state = state
        self._followed = followed
        self._settings = settings
        self._checks = checks
        self._changes = changes
        self._notifier = notifier
        self._clock = clock

    def evaluate(self, image: str, digest: str) -> str:
        """Move the promotion of ``digest`` on as far as it may go now; say where it stands."""
        promotion = self._state.get_promotion(image)
        if promotion is None or promotion.digest != digest or promotion.status is not PromotionStatus.ROLLING:
            return "not-rolling"
        followed = self._followed().get(image)
        if followed is None:
            return "not-followed"
        settings = self._settings()
        waves = plan(settings, list(followed.targets))
        index = min(promotion.wave, len(waves) - 1)
        wave = waves[index]
        now = self._clock()
        verified_at = promotion.wave_verified_at
        if verified_at is None:
            states = self._state.get_targets([t.id for t in wave.targets])
            waiting = [t.id for t in wave.targets if not done(states.get(t.id), digest, settings.verify)]
            if waiting:
                return f"wave {wave.name}: {len(waiting)} target(s) not verified yet"
            if not self._state.wave_verified(image, digest, promotion.wave, now):
                return "raced"
            verified_at = now
            last = not any(w.targets for w in waves[index + 1 :])  # nothing left to promote
            if wave.targets:
                self._state.image_event(
                    image,
                    digest,
                    "verified",
                    now,
                    detail=", ".join(t.id for t in wave.targets),
                    wave=wave.name,
                )
                if self._notifier is not None and self._state.claim_notice(
                    image, digest, f"verified_{index}", now
                ):
                    self._notifier.send(
                        RolloutEvent(
                            event="verified",
                            image=image,
                            digest=digest,
                            wave=wave.name,
                            targets=[t.id for t in wave.targets],
                            at=now,
                            trigger=promotion.trigger,
                            correlation_id=promotion.correlation_id,
                            complete=last,
                        )
                    )
            if last:
                if self._state.end_promotion(
                    image, digest, PromotionStatus.COMPLETE, now, "every wave verified"
                ):
                    self._state.image_event(image, digest, "complete", now)
                return "complete"
        soak_ms = settings.soak_after(wave.wave) * 1000 if wave.targets else 0
        remaining_ms = verified_at + soak_ms - now
        if remaining_ms > 0:
            delay = min(MAX_DELAY_S, -(-remaining_ms // 1000))
            self._checks.send(
                Check(
                    kind="advance",
                    image=image,
                    digest=digest,
                    observed_at=promotion.observed_at,
                    trigger=promotion.trigger,
                    correlation_id=promotion.correlation_id,
                ),
                delay,
            )
            return f"wave {wave.name}: soaking, {remaining_ms / 1000:.0f} s left"
        if not self._state.advance_promotion(image, digest, promotion.wave, now):
            return "raced"
        following = waves[index + 1]
        self._state.image_event(image, digest, "wave-started", now, wave=following.name)
        logger.info("promoting", extra={"image": image, "digest": digest, "wave": following.name})
        self._changes.send(
            Change(
                image=image,
                digest=digest,
                observed_at=promotion.observed_at,
                trigger="promote",
                correlation_id=promotion.correlation_id,
                round=f"wave-{index + 1}",
            )
        )
        return f"wave {following.name} started"

    def retry(self, check: Check) -> str:
        """A deferred rollout: send the change again (the consumer decides again)."""
        promotion = self._state.get_promotion(check.image)
        if (
            promotion is None
            or promotion.digest != check.digest
            or promotion.status is not PromotionStatus.ROLLING
        ):
            return "not-rolling"
        self._changes.send(
            Change(
                image=check.image,
                digest=check.digest,
                observed_at=promotion.observed_at,
                trigger="promote",
                correlation_id=promotion.correlation_id,
                round=f"retry-{self._clock()}",
            )
        )
        return "re-sent"
