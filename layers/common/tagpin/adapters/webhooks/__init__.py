"""Registry push notifications: one parser per source, all normalised to ``PushEvent``.

A notification is a hint, never a command: the webhook service re-resolves the tag at the
registry before anything is enqueued (see tagpin.usecases.detect). Which sources exist, and how each
one authenticates, is one table: ``tagpin.adapters.webhooks.sources.SOURCES``.

A parser is ``parse(body, headers, options) -> list[PushEvent]``: ``headers`` have lower-case
names, ``options`` are the source's non-secret settings (e.g. the pull host of a Nexus
repository, which the payload does not carry). It keeps what is a push of a tag, drops what is
not (pulls, deletes, digest-only pushes) and raises ``WebhookError(400, ...)`` for a body it
cannot read, with a message that says where.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from tagpin.ports.webhooks import WebhookError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails


class Payload(BaseModel):
    """Base of the sender payload models: unknown fields are ignored (senders add fields)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


def describe(errors: list[ErrorDetails], limit: int = 3) -> str:
    """A validation error as ``where: what`` without the input values (which may be huge, or
    carry what a sender should not see echoed)."""
    parts = []
    for error in errors[:limit]:
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    more = len(errors) - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def decode[P: BaseModel](model: type[P], body: bytes | str) -> P:
    """Parse and validate a JSON body (pydantic's JSON parser: no RecursionError, no 5xx)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        if errors and errors[0]["type"] == "json_invalid":
            raise WebhookError(400, f"body is not valid JSON: {describe(errors)}") from None
        raise WebhookError(400, f"unexpected payload: {describe(errors)}") from None


def split_prefix(prefix: str, path: str) -> tuple[str, str]:
    """``host[:port][/path]`` + image path -> (host, repository)."""
    host, _, base = prefix.strip("/").partition("/")
    return host, f"{base}/{path}" if base else path


def epoch_time(value: float | None) -> str | None:
    """Epoch seconds as RFC 3339 UTC; None when absent or out of range."""
    if value is None:
        return None
    try:
        return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None
