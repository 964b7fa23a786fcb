"""A delivery's events judged before anything is done with them, by both of the webhook's stages:
each made safe and its canonical tag found, or the 4xx of the first that cannot be
(``tagpin.usecases.webhook`` queues them, ``tagpin.usecases.webhook_check`` checks them); and the
answer either stage gives (``WebhookResult``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import ImageRef, InvalidReference, is_digest
from tagpin.ports.webhooks import PushEvent, WebhookError
from tagpin.usecases.webhook_keys import printable

MAX_EVENTS = 1000  # events per delivery (docs/webhooks.md); a delivery is decided in one request's time


@dataclass(frozen=True)
class WebhookResult:
    status: int
    body: dict[str, Any] = field(default_factory=dict)


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


def validated(events: list[PushEvent] | tuple[PushEvent, ...]) -> list[tuple[PushEvent, FollowedKey]]:
    """Every event made safe and its tag, or the 4xx of the first that cannot be (all are judged
    before any is acted on)."""
    if len(events) > MAX_EVENTS:
        raise WebhookError(
            413, f"{len(events)} events in one delivery; the limit is {MAX_EVENTS}: send them in several"
        )
    return [(valid(i, event), tagged(i, event)) for i, event in enumerate(events)]
