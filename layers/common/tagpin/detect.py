"""Detect moved tags: resolve at the registry, record in state, enqueue what is behind.

One mechanism serves the poller (every followed tag) and the webhook (one tag, with the
payload's digest only as a hint): a tag is re-resolved at its registry, the observation is
recorded with a conditional write, and a change is enqueued whenever a target of the tag does
not yet run the digest the tag points to now. Comparing with the targets' state (the level),
not only with the previous digest (the edge), heals a lost message or a failed apply on the
next check.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from tagpin.attestations import AttestationFilter
from tagpin.config import FollowedImage, Target
from tagpin.models import Change, Trigger
from tagpin.queue import ChangeQueue
from tagpin.refs import ImageRef
from tagpin.registry import Resolution
from tagpin.state import StateStore, TagUpdate

logger = logging.getLogger(__name__)


class Resolver(Protocol):
    def resolve(self, ref: ImageRef) -> Resolution: ...


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class CheckResult:
    image: str
    outcome: str  # TagUpdate value, or "error"
    digest: str | None = None
    previous_digest: str | None = None
    enqueued: bool = False
    behind: int = 0
    error: str | None = None
    hint_confirmed: bool | None = None

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def merge_followed(followed: Iterable[FollowedImage]) -> list[FollowedImage]:
    """One entry per tag, with the targets of every listing of it (first listing's order)."""
    merged: dict[str, list[Target]] = {}
    for f in followed:
        targets = merged.setdefault(f.image, [])
        targets.extend(t for t in f.targets if t not in targets)
    return [FollowedImage(image=image, targets=targets) for image, targets in merged.items()]


class Detector:
    def __init__(
        self,
        resolver: Resolver,
        state: StateStore,
        queue: ChangeQueue,
        clock: Callable[[], int] = now_ms,
        concurrency: int = 8,
        confirm_delays: tuple[float, ...] = (0.2, 0.4, 0.8, 1.6),
        sleep: Callable[[float], None] = time.sleep,
        attestations: AttestationFilter | None = None,
    ) -> None:
        self._attestations = attestations
        self._resolver = resolver
        self._state = state
        self._queue = queue
        self._clock = clock
        self._concurrency = concurrency
        self._confirm_delays = confirm_delays
        self._sleep = sleep

    def _resolve(self, followed: FollowedImage, hint_digest: str | None) -> Resolution:
        """Resolve the tag. With a notification's digest as a hint, a registry that does not (yet)
        serve it is asked again a few times: registries notify as the manifest is stored, which can
        be before the tag points to it (distribution tags after the manifest event), and a tag
        being rewritten can answer 5xx for a moment. The registry's answer always wins."""
        for delay in (*self._confirm_delays, None):
            try:
                resolution = self._resolver.resolve(followed.ref)
            except Exception:
                if hint_digest is None or delay is None:
                    raise
            else:
                if hint_digest is None or resolution.digest == hint_digest or delay is None:
                    return resolution
            self._sleep(delay)
        raise AssertionError("unreachable")

    def check(
        self,
        followed: FollowedImage,
        *,
        trigger: Trigger,
        correlation_id: str | None = None,
        hint_digest: str | None = None,
    ) -> CheckResult:
        image = followed.image
        try:
            resolution = self._resolve(followed, hint_digest)
        except Exception as exc:  # one registry's failure must not stop the others
            message = f"{type(exc).__name__}: {exc}"
            logger.warning(
                "resolve failed; keeping the working digest", extra={"image": image, "error": message}
            )
            self._state.record_tag_error(image, message, self._clock())
            return CheckResult(image, "error", error=message)
        if self._attestations is not None and self._attestations.enabled(followed.ref):
            known = self._state.get_tag(image)
            if known is not None and self._attestations.only_attestations(
                followed.ref, known.digest, resolution
            ):
                return CheckResult(image, "ignored", digest=resolution.digest, previous_digest=known.digest)
        return self.observe(
            followed, resolution, trigger=trigger, correlation_id=correlation_id, hint_digest=hint_digest
        )

    def record_error(self, followed: FollowedImage, error: Exception) -> CheckResult:
        """The tag could not be resolved: keep the working digest (nothing is enqueued), note why."""
        message = f"{type(error).__name__}: {error}"
        self._state.record_tag_error(followed.image, message, self._clock())
        return CheckResult(followed.image, "error", error=message)

    def observe(
        self,
        followed: FollowedImage,
        resolution: Resolution,
        *,
        trigger: Trigger,
        correlation_id: str | None = None,
        hint_digest: str | None = None,
    ) -> CheckResult:
        """Record what the registry answered and enqueue a change if any target is behind it."""
        image = followed.image
        observed_at = self._clock()
        confirmed = None if hint_digest is None else hint_digest == resolution.digest
        if confirmed is False:
            logger.warning(
                "notification digest not confirmed by the registry; using the registry's answer",
                extra={"image": image, "hint": hint_digest, "registry_digest": resolution.digest},
            )
        record = self._state.record_tag(image, resolution.digest, observed_at, trigger)
        current = record.current
        if record.result is TagUpdate.CHANGED:
            logger.info(
                "tag moved",
                extra={"image": image, "digest": current.digest, "previous": record.previous_digest},
            )
        ids = [t.id for t in followed.targets]
        targets = self._state.get_targets(ids)
        behind = [
            i for i in ids if not ((st := targets.get(i)) is not None and st.settled_at(current.digest))
        ]
        enqueued = False
        # A digest whose rollout failed (marked bad) is not enqueued until the tag moves.
        if behind and record.result is not TagUpdate.STALE and not current.blocked:
            self._queue.send(
                Change(
                    image=image,
                    digest=current.digest,
                    observed_at=current.observed_at,
                    changed_at=current.changed_at,
                    trigger=trigger,
                    correlation_id=correlation_id,
                )
            )
            enqueued = True
        return CheckResult(
            image,
            record.result.value,
            digest=current.digest,
            previous_digest=record.previous_digest,
            enqueued=enqueued,
            behind=len(behind),
            hint_confirmed=confirmed,
        )

    def check_all(
        self, followed: Iterable[FollowedImage], *, trigger: Trigger, correlation_id: str | None = None
    ) -> list[CheckResult]:
        """Check every followed tag once (even when it is listed more than once), a bounded number
        at a time. The scheduled poll uses ``tagpin.poll.Poller`` instead (batched, time-bounded)."""
        items = merge_followed(followed)
        if not items:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(self._concurrency, len(items)))) as pool:
            return list(
                pool.map(lambda f: self.check(f, trigger=trigger, correlation_id=correlation_id), items)
            )
