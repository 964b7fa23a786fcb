"""Registry push notifications: one parser per source, all normalised to PushEvent.

A notification is a hint, never a command: the webhook service re-resolves the tag at the
registry before anything is enqueued (see tagpin.detect).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


class WebhookError(Exception):
    """The request is unusable; ``status`` is the HTTP status to answer (4xx only)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class PushEvent:
    registry: str  # host as clients pull from it, e.g. "127.0.0.1:5000"
    repository: str
    tag: str
    digest: str | None
    event_time: str | None
    delivery_id: str | None


Parser = Callable[[bytes, Mapping[str, str]], list[PushEvent]]


def parsers() -> dict[str, Parser]:
    from tagpin.webhooks import distribution

    return {"distribution": distribution.parse}
