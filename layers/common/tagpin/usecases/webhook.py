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

The queued stage is ``tagpin.usecases.webhook_check``: a batch of the queue's messages checked
with one lookup of what is followed and one read of the followed tags' states (``batch``), each
message acted on, answered and retried alone; its claims make a replayed delivery a duplicate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tagpin.domain.budget import UNLIMITED, Budget
from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage, NotConfigured, TagpinConfig
from tagpin.ports.webhooks import (
    DeliveryLog,
    Notification,
    NotificationQueue,
    PushEvent,
    Request,
    Source,
    WebhookError,
)
from tagpin.usecases.detect import Detector
from tagpin.usecases.webhook_check import DELIVERY_TTL_S, Batch, Checker, CheckFailed, Queued
from tagpin.usecases.webhook_events import MAX_EVENTS, WebhookResult, validated
from tagpin.usecases.webhook_keys import delivery_key

if TYPE_CHECKING:
    from tagpin.usecases.channels import Channels

# The names the webhook's callers (and its tests) have always imported from here.
__all__ = [
    "DELIVERY_TTL_S",
    "MAX_BODY",
    "MAX_EVENTS",
    "CheckFailed",
    "WebhookResult",
    "WebhookService",
    "delivery_key",
]

logger = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024


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
        self._notifications = notifications
        self._max_body = max_body
        self._sources = sources
        self._checker = Checker(
            config=config,
            detector=detector,
            followed=followed or (lambda: self._config().followed),
            deliveries=deliveries,
            channels=channels,
            clock=clock,
        )

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

    def handle_trusted(
        self, source: str, body: bytes, correlation_id: str | None = None, budget: Budget = UNLIMITED
    ) -> WebhookResult:
        """An event whose sender AWS has already authorised (EventBridge -> Lambda, by IAM): the
        same parsing and the same path, without HTTP authentication (a registry waited for while
        ``budget`` lasts)."""

        def parse() -> list[PushEvent]:
            known = self._sources.get(source)
            if known is None:
                raise WebhookError(404, f"unknown source {source[:64]!r}")
            return known.parse(body, {})

        return self._answer(
            source, lambda: self._checker.act(Queued.of(source, parse(), correlation_id), budget=budget)
        )

    def check_queued(self, body: str, message_id: str | None = None) -> WebhookResult:
        """The queued stage for one message of the notifications queue (``batch`` of one), received
        as SQS message ``message_id``."""
        return self.batch([body]).check(body, message_id)

    def batch(self, bodies: Iterable[str], budget: Budget = UNLIMITED) -> Batch:
        """The queued stage: a batch of the notifications queue's messages, looked up once; each
        checked by ``Batch.check`` (202 with the counts of accepted, ignored and duplicate events;
        raises when it must be tried again: ``CheckFailed`` (a registry unreachable),
        ``NotConfigured`` (the configuration is gone), our own store or queue failing; a message
        that is not a queued notification is answered 400 and dropped). ``budget``: the
        invocation's time (a record started only while it lasts, a registry waited for as long)."""
        return self._checker.batch(bodies, budget)

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

    def _queue(self, source: str, events: list[PushEvent], correlation_id: str | None) -> WebhookResult:
        """The validated events queued for the check, one notification per delivery (the queue
        splits it by size). The configuration is loaded first: before the stack is configured the
        sender is answered 503 and retries, as before, instead of queueing what cannot be checked."""
        checked = tuple(event for event, _ in validated(events))
        self._config()
        if checked:
            self._notifications().send([Notification(source, checked, correlation_id)])
        return WebhookResult(202, {"queued": len(checked)})
