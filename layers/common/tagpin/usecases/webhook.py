"""The webhook's domain: authenticate, parse and validate, queue; then, from the queue, keep followed
tags, deduplicate, re-resolve, enqueue the changes.

Every source is a ``tagpin.ports.webhooks.Source`` (authentication + parser; the table is
``tagpin.adapters.webhooks.sources.SOURCES``); nothing here is specific to one sender.

Answers: 404 unknown source, 401 missing/bad authentication (also when no secret is configured
for the source: closed, not open), 400 malformed or oversized body, 503 before the stack is
configured (no configuration parameter or webhook secret yet), 202 with the count of queued
events otherwise. Nothing a sender can put in a request leads to a 5xx.

Two stages (``handle``, then ``check_queued``): an HTTP delivery is answered once its validated
events are durably queued (``NotificationQueue``, SQS), not after their check: a registry sends an
endpoint's notifications one at a time, so each check's round trips (the claim, the registry, the
record, the changes queue) were the wait of every push behind it. The check runs from the queue, in
invocations side by side; one that fails (the registry unreachable, our own store) raises, so its
message is received again and, after the queue's maxReceiveCount, dead-lettered (a notification is
a hint: the poller and the reconciler pick the tag up in any case). ECR's EventBridge events
(``handle_trusted``) are asynchronous already: they are checked at once.

Replays: an event that carries a delivery id (GitHub/Nexus delivery headers, CloudEvents and
Event Grid ids, Pub/Sub message ids, distribution event ids, EventBridge ids, the generic ``id``)
is claimed in the state table, per (source, delivery id, tag), with a TTL, in the queued stage; a
second delivery with the same id is counted as a duplicate and nothing of it is recorded or
enqueued (its registry request is made beside the claim and its answer dropped). A claim is
released when the check failed (registry down), so the queue's retry is not lost. Deliveries
without an id, and replays under a new id, still enqueue at most once per (image, digest): the
state write answers UNCHANGED, the target's APPLIED state stops the level check, and SQS FIFO
deduplicates (image, digest) for 5 minutes.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from tagpin.domain.channels import FollowedKey, repository_part
from tagpin.domain.config import FollowedImage, NotConfigured, TagpinConfig
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import Observation, TagOutcome
from tagpin.domain.refs import ImageRef, InvalidReference, is_digest
from tagpin.ports.registry import Resolution
from tagpin.ports.webhooks import (
    DeliveryLog,
    Notification,
    NotificationQueue,
    PushEvent,
    Request,
    Source,
    WebhookError,
)
from tagpin.usecases import overlap
from tagpin.usecases.detect import Detector
from tagpin.usecases.followed import Followed
from tagpin.usecases.webhook_keys import delivery_key, event_correlation, printable, select

if TYPE_CHECKING:
    from tagpin.usecases.channels import Channels

logger = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
MAX_EVENTS = 1000  # events per delivery (docs/webhooks.md); a delivery is decided in one request's time
DELIVERY_TTL_S = 7 * 24 * 3600  # longer than any sender retries or lets an operator redeliver
EARLY_CHECKS = 4  # configured tags of a delivery whose claim and registry request start before the lookup

# A followed tag's check begun: its delivery claim (the key; False: seen before; None: not
# tracked) and the registry's answer (or what it failed with), each on its way.
type Begun = tuple[Future[str | bool | None], Future[Resolution | Exception]]


@dataclass(frozen=True)
class WebhookResult:
    status: int
    body: dict[str, Any] = field(default_factory=dict)


class CheckFailed(RuntimeError):
    """A queued notification's check could not be made (a registry unreachable): its message is
    received again later (its delivery claims were released)."""

    def __init__(self, result: WebhookResult) -> None:
        errors = [e for e in result.body.get("events", []) if e.get("outcome") == TagOutcome.ERROR.value]
        super().__init__(f"{len(errors)} of the notification's tags could not be checked")
        self.result = result


def valid(index: int, event: PushEvent) -> PushEvent:
    """The event with what a sender may put anywhere made safe, or a 400 naming the field that
    cannot be valid (a digest that is not one). Image parts are checked by ``tagged``."""
    if event.digest is not None and not is_digest(event.digest):
        raise WebhookError(400, f"events[{index}].digest: not a digest: {printable(event.digest, 80)!r}")
    return replace(
        event,
        delivery_id=None if event.delivery_id is None else printable(event.delivery_id),
        event_time=None if event.event_time is None else printable(event.event_time, 64),
    )


def tagged(index: int, event: PushEvent) -> FollowedKey:
    """The canonical ``registry/repository:tag`` of an event, or a 400 naming what is wrong."""
    try:
        image = ImageRef.parse(str(ImageRef(event.registry, event.repository, event.tag, None)))
        # Inside the try: parts that re-parse as a digest reference have no tag (ValueError).
        return FollowedKey.of(image)
    except (InvalidReference, ValueError) as exc:
        raise WebhookError(400, f"events[{index}]: invalid image: {printable(str(exc), 300)}") from None


class WebhookService:
    def __init__(
        self,
        *,
        sources: Mapping[str, Source],
        secrets: Callable[[], Mapping[str, Any]],
        config: Callable[[], TagpinConfig],
        detector: Callable[[], Detector],
        notifications: Callable[[], NotificationQueue],
        deliveries: Callable[[], DeliveryLog] | None = None,
        clock: Callable[[], float] = time.time,
        max_body: int = MAX_BODY,
        followed: Callable[[], Mapping[FollowedKey, FollowedImage]] | None = None,  # default: config's
        channels: Callable[[], Channels] | None = None,  # version channels (None: tags only)
    ) -> None:
        self._secrets = secrets
        self._config = config
        self._followed = followed or (lambda: self._config().followed)
        self._detector = detector
        self._notifications = notifications
        self._deliveries = deliveries
        self._clock = clock
        self._max_body = max_body
        self._sources = sources
        self._channels = channels

    def handle(
        self,
        source: str,
        headers: Mapping[str, str],
        body: bytes,
        correlation_id: str | None = None,
        *,
        query: Mapping[str, str] | None = None,
    ) -> WebhookResult:
        """An HTTP delivery on ``POST /webhooks/{source}``: authenticated, parsed and validated,
        queued, answered (202 ``{"queued": n}``); checked later (``check_queued``)."""
        request = Request({k.lower(): v for k, v in headers.items()}, dict(query or {}), body)
        return self._answer(source, lambda: self._queue(source, self._http(source, request), correlation_id))

    def handle_trusted(self, source: str, body: bytes, correlation_id: str | None = None) -> WebhookResult:
        """An event whose sender AWS has already authorised (EventBridge -> Lambda, by IAM): the
        same parsing and the same path, without HTTP authentication."""

        def parse() -> list[PushEvent]:
            known = self._sources.get(source)
            if known is None:
                raise WebhookError(404, f"unknown source {source[:64]!r}")
            return known.parse(body, {})

        return self._answer(source, lambda: self._act(source, parse(), correlation_id))

    def check_queued(self, body: str) -> WebhookResult:
        """The queued stage: one message of the notifications queue checked (202 with the counts of
        accepted, ignored and duplicate events). Raises when it must be tried again: ``CheckFailed``
        (a registry unreachable), ``NotConfigured`` (the configuration is gone), our own store or
        queue failing. A message that is not a queued notification is answered 400 and dropped."""
        try:
            notification = Notification.from_json(body)
            result = self._act(notification.source, list(notification.events), notification.correlation_id)
        except (ValueError, WebhookError) as exc:  # not what the HTTP path queues: never retried
            reason = exc.message if isinstance(exc, WebhookError) else str(exc)
            logger.warning("queued notification dropped", extra={"reason": reason})
            return WebhookResult(400, {"error": reason})
        logger.info(
            "notification checked",
            extra={
                "source": notification.source[:64],
                **{k: result.body[k] for k in ("accepted", "ignored", "duplicates")},
            },
        )
        if any(e["outcome"] == TagOutcome.ERROR.value for e in result.body["events"]):
            raise CheckFailed(result)
        return result

    # -- steps ------------------------------------------------------------------------------------
    def _answer(self, source: str, act: Callable[[], WebhookResult]) -> WebhookResult:
        try:
            return act()
        except NotConfigured as exc:  # a stack not configured yet: "try later", never a 5xx error
            logger.warning(
                "webhook before configuration", extra={"source": source[:64], "reason": exc.reason}
            )
            return WebhookResult(503, {"error": f"tagpin is not configured yet: {exc}"})
        except WebhookError as exc:
            logger.info(
                "webhook rejected", extra={"source": source[:64], "status": exc.status, "reason": exc.message}
            )
            return WebhookResult(exc.status, {"error": exc.message})

    def _http(self, source: str, request: Request) -> list[PushEvent]:
        known = self._sources.get(source)
        if known is None:
            raise WebhookError(
                404, f"unknown source {source[:64]!r}; known: {', '.join(sorted(self._sources))}"
            )
        # Authenticated before the size check: strangers learn nothing.
        options = known.authenticate(source, request, self._secrets().get(source))
        if len(request.body) > self._max_body:
            raise WebhookError(
                413, f"body of {len(request.body)} bytes exceeds the limit of {self._max_body} bytes"
            )
        return known.parse(request.body, request.headers, options)

    @staticmethod
    def _validated(events: list[PushEvent]) -> list[tuple[PushEvent, FollowedKey]]:
        """Every event made safe and its tag, or the 4xx of the first that cannot be (all are
        judged before any is acted on)."""
        if len(events) > MAX_EVENTS:
            raise WebhookError(
                413, f"{len(events)} events in one delivery; the limit is {MAX_EVENTS}: send them in several"
            )
        return [(valid(i, event), tagged(i, event)) for i, event in enumerate(events)]

    def _queue(self, source: str, events: list[PushEvent], correlation_id: str | None) -> WebhookResult:
        """The validated events queued for the check, one notification per delivery (the queue
        splits it by size). The configuration is loaded first: before the stack is configured the
        sender is answered 503 and retries, as before, instead of queueing what cannot be checked."""
        checked = tuple(event for event, _ in self._validated(events))
        self._config()
        if checked:
            self._notifications().send([Notification(source, checked, correlation_id)])
        return WebhookResult(202, {"queued": len(checked)})

    def _act(self, source: str, events: list[PushEvent], correlation_id: str | None) -> WebhookResult:
        images = self._validated(events)
        # A tag the configuration follows is followed whatever the lookup adds (discovered
        # targets): its claim and its registry request start now, beside the lookup.
        # (The first few: a delivery of many events does not queue them all ahead of the lookup.)
        configured = self._config().followed
        early: dict[FollowedKey, Begun] = {}
        for event, image in images:
            if len(early) < EARLY_CHECKS and image not in early and (f := configured.get(image)) is not None:
                early[image] = self._begin(source, event, f, None)
        try:
            return self._checks(source, images, early, correlation_id)
        finally:
            for begun in early.values():  # begun and not concluded (an error on the way): heard again
                self._release(begun)

    def _checks(
        self,
        source: str,
        images: list[tuple[PushEvent, FollowedKey]],
        early: dict[FollowedKey, Begun],
        correlation_id: str | None,
    ) -> WebhookResult:
        # One lookup of what is followed (configuration + label-discovered), not one per event:
        # the tags, and the version channels of the pushed repositories.
        followed_images, channels = self._lookup([image for _, image in images])
        results: list[Observation] = []
        ignored = duplicates = 0
        seen: set[FollowedKey] = set()
        for event, image in images:
            repository, tag = image.rsplit(":", 1)
            checks: list[tuple[FollowedImage, ImageRef | None]] = []
            if (followed := followed_images.get(image)) is not None:
                checks.append((followed, None))
            for channel in channels.get(repository, []):
                head = self._channel_heads().pushed(channel, tag)
                if head is not None:
                    checks.append((channel, head.ref))
            if not checks:
                ignored += 1
                reason = "not followed" if repository not in channels else "not a new version of its channels"
                results.append(Observation(image, TagOutcome.IGNORED, reason=reason))
                continue
            for followed, ref in checks:
                if followed.image in seen:
                    continue  # several events for one tag in one delivery: one detection is enough
                seen.add(followed.image)
                begun = early.pop(followed.image, None) if ref is None else None
                observation = self._check(source, event, followed, ref, correlation_id, begun)
                duplicates += observation.outcome is TagOutcome.DUPLICATE
                results.append(observation)
        accepted = len(results) - ignored - duplicates
        return WebhookResult(
            202,
            {
                "accepted": accepted,
                "ignored": ignored,
                "duplicates": duplicates,
                "events": [r.as_dict() for r in results],
            },
        )

    def _begin(self, source: str, event: PushEvent, followed: FollowedImage, ref: ImageRef | None) -> Begun:
        """One followed tag's claim of the delivery and its registry request, started side by side
        (neither needs the other's answer: one round trip less per notification, and the registry
        delivers its notifications one after the other). A duplicate delivery costs its registry
        request; nothing of it is recorded or enqueued."""
        claim = overlap.start(partial(self._claim, source, event, followed.image))
        resolution = overlap.start(
            partial(self._detector().resolve, followed, hint_digest=event.digest, ref=ref)
        )
        return claim, resolution

    def _release(self, begun: Begun) -> None:
        """A begun check that will not be concluded: its claim released (the retry is heard)."""
        claim, _ = begun
        with contextlib.suppress(Exception):
            if isinstance(key := claim.result(), str):
                self._log().release_delivery(key, int(self._clock()))

    def _check(
        self,
        source: str,
        event: PushEvent,
        followed: FollowedImage,
        ref: ImageRef | None,
        correlation_id: str | None,
        begun: Begun | None = None,
    ) -> Observation:
        """One followed tag (or channel, at ``ref``): claim the delivery and re-resolve (``begun``
        before, or now), then record."""
        claiming, resolving = begun or self._begin(source, event, followed, ref)
        try:
            claim = claiming.result()
        finally:
            resolved = resolving.result()  # never raises: an error is the answer
        if claim is False:
            return Observation(followed.image, TagOutcome.DUPLICATE, delivery_id=event.delivery_id)
        try:
            observation = self._detector().conclude(
                followed,
                resolved,
                trigger=Trigger.WEBHOOK,
                correlation_id=event_correlation(correlation_id, source, event.delivery_id),
                hint_digest=event.digest,
                ref=ref,
            )
        except BaseException:  # our own store or queue failed: the sender's retry must be heard
            if isinstance(claim, str):
                self._log().release_delivery(claim, int(self._clock()))
            raise
        if observation.outcome is TagOutcome.ERROR and isinstance(claim, str):
            # The registry could not be asked: a redelivery of this notification is detected
            # again (the poller and the reconciler pick the tag up in any case).
            self._log().release_delivery(claim, int(self._clock()))
        return observation

    def _lookup(
        self, images: list[FollowedKey]
    ) -> tuple[Mapping[FollowedKey, FollowedImage], dict[str, list[FollowedImage]]]:
        """The followed tags among ``images`` and the version channels of their repositories:
        one lookup for the whole delivery (``Followed.lookup``; a plain mapping, the
        configuration's, is looked up in memory)."""
        repositories = [image.rsplit(":", 1)[0] for image in images] if self._channels is not None else []
        followed = self._followed()
        if isinstance(followed, Followed):
            return followed.lookup(images, repositories)
        channels: dict[str, list[FollowedImage]] = {}
        for image, f in followed.items():
            if f.policy is not None and (repository := repository_part(image)) in repositories:
                channels.setdefault(repository, []).append(f)
        return select(followed, images), channels

    def _channel_heads(self) -> Channels:
        assert self._channels is not None
        return self._channels()

    def _log(self) -> DeliveryLog:
        assert self._deliveries is not None
        return self._deliveries()

    def _claim(self, source: str, event: PushEvent, tagged: str) -> str | bool | None:
        """The claimed key; False when the delivery was seen before; None when not tracked."""
        if self._deliveries is None or not event.delivery_id:
            return None
        key = delivery_key(source, event.delivery_id, tagged)
        now = int(self._clock())
        if not self._log().claim_delivery(key, now, now + DELIVERY_TTL_S):
            logger.info("duplicate delivery", extra={"source": source, "image": tagged})
            return False
        return key
