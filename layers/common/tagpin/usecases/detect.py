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
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from functools import partial

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage, Target
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import Observation, TagOutcome
from tagpin.domain.refs import Digest, ImageRef
from tagpin.ports.queues import ChangeQueue
from tagpin.ports.registry import Resolution, Resolver
from tagpin.ports.state import State, TagState, TargetState
from tagpin.usecases import overlap
from tagpin.usecases.attestations import AttestationFilter

logger = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _done[T](value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future


def merge_followed(followed: Iterable[FollowedImage]) -> list[FollowedImage]:
    """One entry per tag (or channel), with the targets of every listing of it (first listing's
    order and policy). A tag listed once with distinct targets is its listing itself (a poll of
    10,000 tags copied 10,000 models for nothing)."""
    first: dict[FollowedKey, FollowedImage] = {}
    merged: dict[FollowedKey, list[Target]] = {}
    for f in followed:
        first.setdefault(f.image, f)
        targets = merged.setdefault(f.image, [])
        targets.extend(t for t in f.targets if t not in targets)
    return [
        # the merged list starts with the first listing's targets: as long means the same
        first[image]
        if len(targets) == len(first[image].targets)
        else first[image].model_copy(update={"targets": targets})
        for image, targets in merged.items()
    ]


class StateAhead:
    """The items several checks would each read, read once for all of them and started before
    their registries answer (the webhook's batch): the targets' states, and the tags' own items
    where a check reads them (a registry that ignores attestation-only changes). ``conclude`` reads
    none of them again. Read ahead as the poll reads them: a target applied after the read costs
    one more message (the consumer finds nothing to do); one whose state went back meanwhile is
    found behind by the next poll (the level). A failed read raises at each check that needs it."""

    def __init__(
        self, tags: Future[dict[FollowedKey, TagState]], targets: Future[dict[str, TargetState]]
    ) -> None:
        self._tags = tags
        self._targets = targets

    def known(self, image: FollowedKey) -> TagState | None:
        return self._tags.result().get(image)

    def targets(self, followed: FollowedImage) -> dict[str, TargetState | None]:
        """Each of ``followed``'s targets' state, None for one that has none yet (read, not found)."""
        states = self._targets.result()
        return {t.id: states.get(t.id) for t in followed.targets}


class Detector:
    def __init__(
        self,
        resolver: Resolver,
        state: State,
        queue: ChangeQueue,
        clock: Callable[[], int] = now_ms,
        confirm_delays: tuple[float, ...] = (0.2, 0.4, 0.8, 1.6),
        sleep: Callable[[float], None] = time.sleep,
        attestations: AttestationFilter | None = None,
    ) -> None:
        self._attestations = attestations
        self._resolver = resolver
        self._state = state
        self._queue = queue
        self._clock = clock
        self._confirm_delays = confirm_delays
        self._sleep = sleep

    def _resolve(self, ref: ImageRef, hint_digest: str | None) -> Resolution:
        """Resolve the tag. With a notification's digest as a hint, a registry that does not (yet)
        serve it is asked again a few times: registries notify as the manifest is stored, which can
        be before the tag points to it (distribution tags after the manifest event), and a tag
        being rewritten can answer 5xx for a moment. The registry's answer always wins."""
        for delay in (*self._confirm_delays, None):
            try:
                resolution = self._resolver.resolve(ref)
            except Exception:
                if hint_digest is None or delay is None:
                    raise
            else:
                if hint_digest is None or resolution.digest == hint_digest or delay is None:
                    return resolution
            self._sleep(delay)
        raise AssertionError("unreachable")

    def detect(
        self,
        followed: FollowedImage,
        *,
        trigger: Trigger,
        correlation_id: str | None = None,
        hint_digest: str | None = None,
        ref: ImageRef | None = None,
    ) -> Observation:
        """Resolve the followed tag (a version channel: ``ref``, its head) and ``observe`` it."""
        resolved = self.resolve(followed, hint_digest=hint_digest, ref=ref)
        return self.conclude(
            followed,
            resolved,
            trigger=trigger,
            correlation_id=correlation_id,
            hint_digest=hint_digest,
            ref=ref,
        )

    def resolve(
        self, followed: FollowedImage, *, hint_digest: str | None = None, ref: ImageRef | None = None
    ) -> Resolution | Exception:
        """``detect``'s first step: the registry's answer for the followed tag (a version channel:
        ``ref``), or what it failed with; nothing recorded. The webhook asks it beside its other
        round trips (the delivery's claim), then ``conclude``s."""
        try:
            return self._resolve(ref or followed.ref, hint_digest)
        except Exception as exc:  # one registry's failure must not stop the others
            return exc

    def read_ahead(self, followed: Iterable[FollowedImage]) -> StateAhead:
        """What ``conclude`` would read for each of ``followed``, for all of them at once: two
        batched reads started side by side (the tags' items only where a check reads them)."""
        followed = list(followed)
        ids = list(dict.fromkeys(t.id for f in followed for t in f.targets))
        images = [
            f.image for f in followed if self._reads_tag(key.repository if (key := f.channel_key) else f.ref)
        ]
        return StateAhead(
            overlap.start(partial(self._state.tags.get_many, images)) if images else _done({}),
            overlap.start(partial(self._state.targets.get_many, ids)) if ids else _done({}),
        )

    def _reads_tag(self, ref: ImageRef) -> bool:
        """Whether ``conclude`` reads the tag's item for ``ref`` (its registry ignores changes of
        attestations only)."""
        return self._attestations is not None and self._attestations.enabled(ref)

    def conclude(
        self,
        followed: FollowedImage,
        resolved: Resolution | Exception,
        *,
        trigger: Trigger,
        correlation_id: str | None = None,
        hint_digest: str | None = None,
        ref: ImageRef | None = None,
        ahead: StateAhead | None = None,
    ) -> Observation:
        """``detect``'s second step, on ``resolve``'s answer: a failure recorded (the working digest
        kept), an attestation-only change ignored, else ``observe``. ``ahead``: the items it reads,
        read before (``read_ahead``, with ``followed`` among them)."""
        image = followed.image
        ref = ref or followed.ref
        if isinstance(resolved, Exception):
            message = f"{type(resolved).__name__}: {resolved}"
            logger.warning(
                "resolve failed; keeping the working digest", extra={"image": image, "error": message}
            )
            self._state.tags.record_error(image, message, self._clock())
            return Observation(image, TagOutcome.ERROR, error=message)
        resolution = resolved
        known: TagState | None = None
        if self._attestations is not None and self._reads_tag(ref):
            known = self._state.tags.get(image) if ahead is None else ahead.known(image)
            if known is not None and self._attestations.only_attestations(ref, known.digest, resolution):
                return Observation(
                    image,
                    TagOutcome.IGNORED,
                    digest=resolution.digest,
                    previous_digest=known.digest,
                    reason="attestation-only change",
                )
        return self.observe(
            followed,
            resolution,
            trigger=trigger,
            correlation_id=correlation_id,
            hint_digest=hint_digest,
            known=known,
            targets=None if ahead is None else ahead.targets(followed),
        )

    def record_error(self, followed: FollowedImage, error: Exception | str) -> Observation:
        """The tag could not be resolved (a channel's tags not listed): keep the working digest
        (nothing is enqueued), note why."""
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self._state.tags.record_error(followed.image, message, self._clock())
        return Observation(followed.image, TagOutcome.ERROR, error=message)

    def observe(
        self,
        followed: FollowedImage,
        resolution: Resolution,
        *,
        trigger: Trigger,
        correlation_id: str | None = None,
        hint_digest: str | None = None,
        known: TagState | None = None,
        targets: Mapping[str, TargetState | None] | None = None,
    ) -> Observation:
        """Record what the registry answered and enqueue a change if any target is behind it.

        ``known`` and ``targets``: the tag's and its targets' items as the caller (the poll, the
        webhook's batch) read them just before, so that they are not read again (a target left out
        is read now; one given as None was read and has no state yet). A target read before it was applied
        at the new digest costs one more message (the consumer finds nothing to do); one whose
        state regressed since the read is found behind by the next poll (the level)."""
        image = followed.image
        observed_at = self._clock()
        confirmed = None if hint_digest is None else hint_digest == resolution.digest
        if confirmed is False:
            logger.warning(
                "notification digest not confirmed by the registry; using the registry's answer",
                extra={"image": image, "hint": hint_digest, "registry_digest": resolution.digest},
            )
        ids = [t.id for t in followed.targets]
        reading = None
        if targets is None or any(i not in targets for i in ids):  # not read (or left out): read now,
            reading = overlap.start(partial(self._state.targets.get_many, ids))  # while the tag is recorded
        if followed.policy is not None:
            # A version channel's head: the tag the resolution was of (tagpin.usecases.channels),
            # recorded in version order (an older version than the stored head is STALE).
            if resolution.ref.tag is None:
                raise ValueError(f"{image}: a channel is resolved at a version, not {resolution.ref}")
            record = self._state.heads.move(
                image, resolution.digest, observed_at, trigger, resolution.ref.tag, followed.policy
            )
        else:
            # The change's write first when the tag was read at another digest, or when a
            # notification of this very digest says it moved (a re-push of the same digest costs
            # the failed conditional write a move costs otherwise).
            moved = (known is not None and known.digest != resolution.digest) or confirmed is True
            record = self._state.tags.record(image, resolution.digest, observed_at, trigger, moved=moved)
        current = record.current
        if record.result is TagOutcome.CHANGED:
            logger.info(
                "tag moved",
                extra={"image": image, "digest": current.digest, "previous": record.previous_digest},
            )
        states: Mapping[str, TargetState | None] = (
            reading.result() if reading is not None else (targets or {})
        )
        behind = [i for i in ids if not ((st := states.get(i)) is not None and st.settled_at(current.digest))]
        enqueued = False
        # A digest whose rollout failed (marked bad) is not enqueued until the tag moves.
        if behind and record.result is not TagOutcome.STALE and not current.blocked:
            self._queue.send(
                Change(
                    move=Move(
                        image=image,
                        digest=Digest(current.digest),
                        observed_at=current.observed_at,
                        changed_at=current.changed_at,
                        trigger=trigger,
                        correlation_id=correlation_id,
                        tag=current.version if followed.policy is not None else None,
                    ),
                )
            )
            enqueued = True
        return Observation(
            image,
            record.result,
            digest=current.digest,
            previous_digest=record.previous_digest,
            enqueued=enqueued,
            behind=len(behind),
            hint_confirmed=confirmed,
        )
