"""Azure Container Registry: the registry webhook and the Event Grid form.

- Webhook (action ``push``): one distribution-like event ``{"id", "timestamp", "action",
  "target": {"repository", "tag", "digest", "mediaType"}, "request": {"host"}}``.
- Event Grid: a list of events (Event Grid schema: ``eventType``, ``eventTime``) or one
  CloudEvent (``specversion``, ``type``); ``Microsoft.ContainerRegistry.ImagePushed`` wraps the
  same object in ``data``. Event Grid's subscription validation event is acknowledged as ignored
  and its ``validationUrl`` is logged: complete the handshake by opening it (manual validation).

Only pushes with a tag are kept (``chart_push``, deletes and digest-only pushes are dropped).
ACR cannot sign; authentication is a custom header (static secret).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pydantic import Field, RootModel

from tagpin.adapters.webhooks import Payload, decode
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError

logger = logging.getLogger(__name__)

PUSHED = "Microsoft.ContainerRegistry.ImagePushed"
VALIDATION = "Microsoft.EventGrid.SubscriptionValidationEvent"
MAX_EVENTS = 100


class Target(Payload):
    repository: str | None = None
    tag: str | None = None
    digest: str | None = None


class RequestInfo(Payload):
    host: str | None = None


class AcrEvent(Payload):
    id: str | None = None
    timestamp: str | None = None
    action: str | None = None
    target: Target | None = None
    request: RequestInfo | None = None
    validationUrl: str | None = None


class GridEvent(Payload):
    id: str | None = None
    eventType: str | None = None
    type: str | None = None  # CloudEvents
    eventTime: str | None = None
    time: str | None = None
    data: AcrEvent | None = None


class GridList(RootModel[list[GridEvent]]):
    root: list[GridEvent] = Field(max_length=MAX_EVENTS)


def _push(event: AcrEvent, where: str, delivery: str | None, when: str | None) -> list[PushEvent]:
    target = event.target
    if event.action != "push" or target is None or not target.tag:
        return []
    host = event.request.host if event.request else None
    if not target.repository or not host:
        raise WebhookError(400, f"{where}: a push needs target.repository and request.host")
    return [PushEvent(host, target.repository, target.tag, target.digest or None, when, delivery)]


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    if body.lstrip()[:1] == b"[":
        grid: list[GridEvent] | None = decode(GridList, body).root
    else:
        single = decode(GridEvent, body)
        grid = [single] if (single.eventType or single.type) else None
    if grid is None:  # the registry webhook's own format
        event = decode(AcrEvent, body)
        return _push(event, "event", event.id, event.timestamp)
    pushes: list[PushEvent] = []
    for index, item in enumerate(grid):
        kind = item.eventType or item.type
        if kind == VALIDATION:
            url = item.data.validationUrl if item.data else None
            logger.warning("Event Grid subscription validation: open validationUrl", extra={"url": url})
        if kind != PUSHED or item.data is None:
            continue
        pushes += _push(
            item.data, f"{index}.data", item.id, item.eventTime or item.time or item.data.timestamp
        )
    return pushes
