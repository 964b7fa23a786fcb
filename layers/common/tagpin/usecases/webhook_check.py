"""The webhook's queued stage: what its HTTP path queued, checked a batch at a time.

A batch of the notifications queue (the event source's BatchSize: up to 10 messages; a delivery
over 64 KiB is queued as several) is looked up once: one lookup of what is followed among all its
records' tags (``Followed.lookup``: one Query per tag while there are a few, else one per shard
they fall in, up to 64) and, when several tags are followed, one read of their states
(``Detector.read_ahead``), made by the first record whose check needs them while the others wait
for it (one tag's check reads its own, beside its record's write). Each record is then
checked alone, as a message was before: its delivery claims and registry requests (begun before
the lookup for the tags the configuration follows), its records and changes, its answer; a check
that fails (``CheckFailed``: a registry unreachable; our own store or queue) raises for that record
only, which comes back; a record that is not a queued notification is answered 400, never retried.
A failed lookup fails every record that needs it (each comes back), as each record's own lookup
would have failed before.

The invocation's time (``Budget``): a record is started only while more than the reserve is left,
and a registry that has not answered when only the reserve is left is an error of that tag (its
claim released, the record reported failed and received again), not a timeout of the function.
Lambda stopping the function at its timeout would fail the whole batch and keep the claims it
had made, so the retries of those deliveries would be counted as duplicates (the poll would still
find the tags, minutes later).

Replays: an event that carries a delivery id (GitHub/Nexus delivery headers, CloudEvents and
Event Grid ids, Pub/Sub message ids, distribution event ids, EventBridge ids, the generic ``id``)
is claimed in the state table, per (source, delivery id, tag), with a TTL; a second delivery with
the same id is counted as a duplicate and nothing of it is recorded or enqueued (its registry
request is made beside the claim and its answer dropped). A claim is released when the check
failed (registry down), so the queue's retry is not lost. A claim keeps the SQS message id of the
queued notification that made it: SQS may hand that one message over again while (or after) its
first check runs, and that receive checks it too (``DeliveryLog.claim_delivery``), never counted
as a duplicate: the queue deletes a message once any of its receives succeeds, so a duplicate of
its own claim would lose the notification if its first check then failed. Only another message
(another HTTP delivery: the sender's retry or replay) is a duplicate; that one stays queued until
its own check succeeds. A check made twice records one move and puts one change on the queue, as
deliveries without an id and replays under a new id do: at most once per (image, digest), for the
state write answers UNCHANGED, the target's APPLIED state stops the level check, and SQS FIFO
deduplicates (image, digest) for 5 minutes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as WaitTimedOut
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

from tagpin.domain.budget import UNLIMITED, Budget
from tagpin.domain.channels import FollowedKey, repository_part
from tagpin.domain.config import ConfigError, FollowedImage, TagpinConfig
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import Observation, TagOutcome
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import Resolution
from tagpin.ports.webhooks import DeliveryLog, Notification, PushEvent, WebhookError
from tagpin.usecases import overlap
from tagpin.usecases.detect import Detector, StateAhead
from tagpin.usecases.followed import Followed
from tagpin.usecases.webhook_events import WebhookResult, validated
from tagpin.usecases.webhook_keys import delivery_key, event_correlation, select

if TYPE_CHECKING:
    from tagpin.usecases.channels import Channels

logger = logging.getLogger(__name__)

DELIVERY_TTL_S = 7 * 24 * 3600  # longer than any sender retries or lets an operator redeliver
EARLY_CHECKS = 4  # configured tags of a delivery whose claim and registry request start before the lookup

# A followed tag's check begun: its delivery claim (the key; False: seen before; None: not
# tracked) and the registry's answer (or what it failed with), each on its way.
type Begun = tuple[Future[str | bool | None], Future[Resolution | Exception]]


class CheckFailed(RuntimeError):
    """A queued notification's check could not be made (a registry unreachable): its message is
    received again later (its delivery claims were released)."""

    def __init__(self, result: WebhookResult) -> None:
        errors = [e for e in result.body.get("events", []) if e.get("outcome") == TagOutcome.ERROR.value]
        super().__init__(f"{len(errors)} of the notification's tags could not be checked")
        self.result = result


@dataclass(frozen=True)
class Queued:
    """A notification to check: its sender, its events (made safe) with their tags, its correlation
    id, and the SQS message id it was received as (None: not queued, or not known)."""

    source: str
    images: list[tuple[PushEvent, FollowedKey]]
    correlation_id: str | None
    message_id: str | None = None

    @classmethod
    def of(cls, source: str, events: Iterable[PushEvent], correlation_id: str | None) -> Queued:
        """``events`` judged (``validated``: a ``WebhookError`` for the first that cannot be)."""
        return cls(source, validated(tuple(events)), correlation_id)

    @classmethod
    def from_json(cls, body: str) -> Queued:
        """A message of the notifications queue; ``ValueError`` or ``WebhookError`` when it is not
        what the HTTP path queues."""
        notification = Notification.from_json(body)
        return cls.of(notification.source, notification.events, notification.correlation_id)


@dataclass(frozen=True)
class Lookup:
    """What the checks of a batch share: the followed tags among theirs, the version channels of
    their repositories, and the followed ones' states read ahead (None: fewer than two followed)."""

    followed: Mapping[FollowedKey, FollowedImage]
    channels: dict[str, list[FollowedImage]]
    ahead: StateAhead | None


class Batch:
    """One batch's records, judged as it is made; ``check`` (from any thread) checks one of them,
    the batch's lookup made once, by the first check that needs it."""

    def __init__(self, checker: Checker, bodies: Iterable[str], budget: Budget = UNLIMITED) -> None:
        self._checker = checker
        self._budget = budget
        self._judged: dict[str, Queued | Exception] = {}
        for body in bodies:
            self._judged.setdefault(body, _judge(body))
        tags = (image for q in self._judged.values() if isinstance(q, Queued) for _, image in q.images)
        self._tags = list(dict.fromkeys(tags))
        self._lock = threading.Lock()
        self._looked: Lookup | Exception | None = None

    def check(self, body: str, message_id: str | None = None) -> WebhookResult:
        """One message of the batch (received as SQS message ``message_id``) checked (202 with the
        counts of accepted, ignored and duplicate events). Raises when it must be tried again:
        ``CheckFailed`` (a registry unreachable), ``NotConfigured`` (the configuration is gone),
        our own store or queue failing. A message that is not a queued notification is answered
        400 and dropped."""
        ours = body in self._judged  # else not one of the batch's: judged now, a lookup of its own
        judged = self._judged[body] if ours else _judge(body)
        self._budget.check("a queued notification")  # OutOfTime: not started, received again
        try:
            if isinstance(judged, Exception):
                raise judged
            judged = replace(judged, message_id=message_id)
            result = self._checker.act(judged, self._lookup if ours else None, self._budget)
        except ConfigError:  # the configuration, not the message (NotConfigured: gone): tried again
            raise
        except (ValueError, WebhookError) as exc:  # not what the HTTP path queues: never retried
            reason = exc.message if isinstance(exc, WebhookError) else str(exc)
            logger.warning("queued notification dropped", extra={"reason": reason})
            return WebhookResult(400, {"error": reason})
        logger.info(
            "notification checked",
            extra={
                "source": judged.source[:64],
                **{k: result.body[k] for k in ("accepted", "ignored", "duplicates")},
            },
        )
        if any(e["outcome"] == TagOutcome.ERROR.value for e in result.body["events"]):
            raise CheckFailed(result)
        return result

    def _lookup(self) -> Lookup:
        with self._lock:
            if self._looked is None:
                try:
                    self._looked = self._checker.lookup(self._tags)
                except Exception as exc:  # every check that needs it fails (and comes back)
                    self._looked = exc
            looked = self._looked
        if isinstance(looked, Exception):
            raise looked
        return looked


def _judge(body: str) -> Queued | Exception:
    try:
        return Queued.from_json(body)
    except Exception as exc:  # raised by that record's check, not by the batch's
        return exc


class Checker:
    """Checks notifications: the batch's lookup (``lookup``), then each notification's followed
    tags claimed, re-resolved, recorded and enqueued (``act``)."""

    def __init__(
        self,
        *,
        config: Callable[[], TagpinConfig],
        detector: Callable[[], Detector],
        followed: Callable[[], Mapping[FollowedKey, FollowedImage]],
        deliveries: Callable[[], DeliveryLog] | None,
        channels: Callable[[], Channels] | None,
        clock: Callable[[], float],
    ) -> None:
        self._config = config
        self._detector = detector
        self._followed = followed
        self._deliveries = deliveries
        self._channels = channels
        self._clock = clock

    def batch(self, bodies: Iterable[str], budget: Budget = UNLIMITED) -> Batch:
        return Batch(self, bodies, budget)

    def lookup(self, images: list[FollowedKey]) -> Lookup:
        """The followed tags among ``images`` and the version channels of their repositories (one
        lookup: ``Followed.lookup``; a plain mapping, the configuration's, is looked up in memory),
        and, when there are several, their states' read started (``Detector.read_ahead``)."""
        repositories = [image.rsplit(":", 1)[0] for image in images] if self._channels is not None else []
        followed = self._followed()
        tags: Mapping[FollowedKey, FollowedImage]
        channels: dict[str, list[FollowedImage]] = {}
        if isinstance(followed, Followed):
            tags, channels = followed.lookup(images, repositories)
        else:
            tags, pushed = select(followed, images), set(repositories)
            for image, f in followed.items():
                if f.policy is not None and (repository := repository_part(image)) in pushed:
                    channels.setdefault(repository, []).append(f)
        chosen = [*tags.values(), *(c for listed in channels.values() for c in listed)]
        # A read ahead pays when checks share it. One tag's check reads its targets itself, beside
        # its record's write (``Detector.observe``): read ahead, that read was one more round trip
        # before the write, on a single push's way to its rollout.
        return Lookup(tags, channels, self._detector().read_ahead(chosen) if len(chosen) > 1 else None)

    def act(
        self, queued: Queued, lookup: Callable[[], Lookup] | None = None, budget: Budget = UNLIMITED
    ) -> WebhookResult:
        """``queued`` checked, with its batch's ``lookup`` (None: a lookup of its own), a registry
        answer waited for while ``budget`` lasts."""
        # A tag the configuration follows is followed whatever the lookup adds (discovered
        # targets): its claim and its registry request start now, beside the lookup.
        # (The first few: a delivery of many events does not queue them all ahead of the lookup.)
        configured = self._config().followed
        early: dict[FollowedKey, Begun] = {}
        for event, image in queued.images:
            if len(early) < EARLY_CHECKS and image not in early and (f := configured.get(image)) is not None:
                early[image] = self._begin(queued, event, f, None)
        try:
            looked = lookup() if lookup is not None else self.lookup([image for _, image in queued.images])
            return self._checks(queued, looked, early, budget)
        finally:
            for begun in early.values():  # begun and not concluded (an error on the way): heard again
                self._release(begun)

    def _checks(
        self, queued: Queued, looked: Lookup, early: dict[FollowedKey, Begun], budget: Budget
    ) -> WebhookResult:
        results: list[Observation] = []
        ignored = duplicates = 0
        seen: set[FollowedKey] = set()
        for event, image in queued.images:
            repository, tag = image.rsplit(":", 1)
            checks: list[tuple[FollowedImage, ImageRef | None]] = []
            if (followed := looked.followed.get(image)) is not None:
                checks.append((followed, None))
            for channel in looked.channels.get(repository, []):
                head = self._channel_heads().pushed(channel, tag)
                if head is not None:
                    checks.append((channel, head.ref))
            if not checks:
                ignored += 1
                reason = (
                    "not followed"
                    if repository not in looked.channels
                    else "not a new version of its channels"
                )
                results.append(Observation(image, TagOutcome.IGNORED, reason=reason))
                continue
            for followed, ref in checks:
                if followed.image in seen:
                    continue  # several events for one tag in one delivery: one detection is enough
                seen.add(followed.image)
                begun = early.pop(followed.image, None) if ref is None else None
                observation = self._check(queued, event, followed, ref, looked.ahead, begun, budget)
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

    def _begin(
        self, queued: Queued, event: PushEvent, followed: FollowedImage, ref: ImageRef | None
    ) -> Begun:
        """One followed tag's claim of the delivery and its registry request, started side by side
        (neither needs the other's answer: one round trip less per notification, and the registry
        delivers its notifications one after the other). A duplicate delivery costs its registry
        request; nothing of it is recorded or enqueued."""
        claim = overlap.start(partial(self._claim, queued, event, followed.image))
        resolution = overlap.ask_registry(  # never on the claims' workers: it may never answer
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
        queued: Queued,
        event: PushEvent,
        followed: FollowedImage,
        ref: ImageRef | None,
        ahead: StateAhead | None,
        begun: Begun | None = None,
        budget: Budget = UNLIMITED,
    ) -> Observation:
        """One followed tag (or channel, at ``ref``): claim the delivery and re-resolve (``begun``
        before, or now), then record. A registry that has not answered while ``budget`` lasts is
        this tag's error (the request goes on in the client and its answer is dropped)."""
        claiming, resolving = begun or self._begin(queued, event, followed, ref)
        resolved: Resolution | Exception
        try:
            claim = claiming.result()
        finally:
            try:
                resolved = resolving.result(timeout=budget.left_s())  # an error is the answer
            except WaitTimedOut:
                resolved = TimeoutError(
                    f"the registry did not answer within the invocation's time for {followed.image}"
                )
        if claim is False:
            return Observation(followed.image, TagOutcome.DUPLICATE, delivery_id=event.delivery_id)
        try:
            observation = self._detector().conclude(
                followed,
                resolved,
                trigger=Trigger.WEBHOOK,
                correlation_id=event_correlation(queued.correlation_id, queued.source, event.delivery_id),
                hint_digest=event.digest,
                ref=ref,
                ahead=ahead,
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

    def _channel_heads(self) -> Channels:
        assert self._channels is not None
        return self._channels()

    def _log(self) -> DeliveryLog:
        assert self._deliveries is not None
        return self._deliveries()

    def _claim(self, queued: Queued, event: PushEvent, tagged: str) -> str | bool | None:
        """The claimed key; False when another message claimed the delivery; None when not tracked."""
        if self._deliveries is None or not event.delivery_id:
            return None
        key = delivery_key(queued.source, event.delivery_id, tagged)
        now = int(self._clock())
        if not self._log().claim_delivery(key, now, now + DELIVERY_TTL_S, queued.message_id):
            logger.info("duplicate delivery", extra={"source": queued.source, "image": tagged})
            return False
        return key
