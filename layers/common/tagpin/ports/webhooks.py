"""Registry push notifications, as the webhook use case sees them: who may send (``Source``), what
a notification says (``PushEvent``), and the delivery ids already handled (``DeliveryLog``).

``tagpin.adapters.webhooks`` holds one parser and one authentication scheme per sender, and the
table of sources; ``tagpin.adapters.dynamodb.deliveries`` remembers delivery ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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

    def claim_delivery(self, key: str, now: int, expires_at: int) -> bool: ...

    def release_delivery(self, key: str, now: int) -> None: ...
