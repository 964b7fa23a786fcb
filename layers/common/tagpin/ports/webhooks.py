"""Registry push notifications, as the webhook use case sees them: who may send (``Source``), what
a notification says (``PushEvent``), the delivery ids already handled (``DeliveryLog``), and the queue
that holds accepted notifications until they are checked (``Notification``, ``NotificationQueue``).

``tagpin.adapters.webhooks`` holds one parser and one authentication scheme per sender, and the
table of sources; ``tagpin.adapters.dynamodb.deliveries`` remembers delivery ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Protocol


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


@dataclass(frozen=True)
class SourceOptions:
    """Non-secret per-source settings (from the source's entry in the webhook secret).

    ``registries`` maps a registry-side repository key (Nexus ``repositoryName``, Artifactory
    ``repo_key``) to the prefix clients pull with: ``host[:port][/path]``.
    """

    registries: Mapping[str, str] = field(default_factory=dict)

    def prefix(self, key: str) -> str | None:
        return self.registries.get(key) or self.registries.get("*")


NO_OPTIONS = SourceOptions()


class Parser(Protocol):
    def __call__(
        self, body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /
    ) -> list[PushEvent]: ...


@dataclass(frozen=True)
class Request:
    headers: Mapping[str, str]  # lower-case names
    query: Mapping[str, str]
    body: bytes


class Source(Protocol):
    """One sender: how it authenticates and how its notifications read."""

    def authenticate(self, name: str, request: Request, secret: object) -> SourceOptions:
        """The source's options when ``request`` is authentic under ``secret`` (its entry in the
        webhook secret); ``WebhookError(401)`` otherwise, also when no secret is configured."""
        ...

    def parse(
        self, body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /
    ) -> list[PushEvent]: ...


class DeliveryLog(Protocol):
    """Remembers delivery ids (``tagpin.adapters.dynamodb.deliveries`` implements it)."""

    def claim_delivery(self, key: str, now: int, expires_at: int, message: str | None = None) -> bool:
        """True when ``key`` is unclaimed, its claim expired, or it is held by ``message`` (the
        queued message checking it: SQS received it again while, or after, its first check ran;
        a claim without a message, or another message's, is held)."""
        ...

    def release_delivery(self, key: str, now: int) -> None: ...


QUEUED_VERSION = 1


@dataclass(frozen=True)
class Notification:
    """Validated push events of one delivery, as the webhook's HTTP path queues them for the queued
    stage (the check): who sent them, the request's correlation id and the events, already parsed,
    authenticated and validated (never re-parsed with the sender's parser)."""

    source: str
    events: tuple[PushEvent, ...]
    correlation_id: str | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": QUEUED_VERSION,
                "source": self.source,
                "correlation_id": self.correlation_id,
                "events": [asdict(event) for event in self.events],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Notification:
        """A queued notification; ``ValueError`` when ``text`` is not one (never retried)."""
        try:
            data = json.loads(text)
            if data.get("v") != QUEUED_VERSION:
                raise ValueError(f"unknown version {data.get('v')!r}")
            events = tuple(
                PushEvent(**{name: event[name] for name in _EVENT_FIELDS}) for event in data["events"]
            )
            source, correlation_id = data["source"], data.get("correlation_id")
        except (AttributeError, KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a queued notification: {type(exc).__name__}") from None
        if not isinstance(source, str) or not isinstance(correlation_id, str | None):
            raise ValueError("not a queued notification: source or correlation id")
        return cls(source, events, correlation_id)

    def split(self, limit: int) -> list[Notification]:
        """This notification as several whose JSON each fits in ``limit`` bytes (one event each at
        least; an event is a few hundred bytes, bounded by the validation before it is queued)."""
        if len(self.events) <= 1 or len(self.to_json().encode()) <= limit:
            return [self]
        half = len(self.events) // 2
        first, second = replace(self, events=self.events[:half]), replace(self, events=self.events[half:])
        return [*first.split(limit), *second.split(limit)]


_EVENT_FIELDS = tuple(f.name for f in fields(PushEvent))


class NotificationQueue(Protocol):
    """Where the webhook's HTTP path puts what it accepted, durably, before it answers
    (``tagpin.adapters.sqs_notifications``); the queued stage checks each from there."""

    def send(self, notifications: list[Notification]) -> None:
        """All of them queued, or an exception (the sender's retry is then heard)."""
        ...
