"""The webhook's domain: authenticate, parse, keep followed tags, re-resolve, enqueue.

Answers: 404 unknown source, 401 missing/bad authentication (also when no secret is configured
for the source: closed, not open), 400 malformed or oversized body, 202 with counts otherwise.
Nothing a sender can put in a request leads to a 5xx.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tagpin.config import TagpinConfig
from tagpin.detect import Detector
from tagpin.refs import ImageRef, InvalidReference
from tagpin.webhooks import PushEvent, WebhookError, parsers

logger = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024


@dataclass(frozen=True)
class WebhookResult:
    status: int
    body: dict[str, Any] = field(default_factory=dict)


def _static_header_ok(headers: Mapping[str, str], secret: str, header: str = "authorization") -> bool:
    """The sender can only send a fixed header (distribution, Harbor, ACR). Constant-time compare;
    ``Bearer <secret>`` and the bare secret are both accepted."""
    given = (headers.get(header) or "").encode()
    expected = secret.encode()
    return hmac.compare_digest(given, b"Bearer " + expected) | hmac.compare_digest(given, expected)


class WebhookService:
    def __init__(
        self,
        *,
        secrets: Callable[[], Mapping[str, str]],
        config: Callable[[], TagpinConfig],
        detector: Callable[[], Detector],
        max_body: int = MAX_BODY,
    ) -> None:
        self._secrets = secrets
        self._config = config
        self._detector = detector
        self._max_body = max_body
        self._parsers = parsers()

    def handle(
        self, source: str, headers: Mapping[str, str], body: bytes, correlation_id: str | None = None
    ) -> WebhookResult:
        try:
            return self._handle(source, {k.lower(): v for k, v in headers.items()}, body, correlation_id)
        except WebhookError as exc:
            logger.info(
                "webhook rejected", extra={"source": source[:64], "status": exc.status, "reason": exc.message}
            )
            return WebhookResult(exc.status, {"error": exc.message})

    def _handle(
        self, source: str, headers: dict[str, str], body: bytes, correlation_id: str | None
    ) -> WebhookResult:
        parser = self._parsers.get(source)
        if parser is None:
            raise WebhookError(
                404, f"unknown source {source[:64]!r}; known: {', '.join(sorted(self._parsers))}"
            )
        secret = self._secrets().get(source)
        if not secret:
            raise WebhookError(
                401, f"no secret is configured for source {source!r}; refusing unauthenticated input"
            )
        if not _static_header_ok(headers, secret):
            raise WebhookError(401, "missing or invalid credentials")
        if len(body) > self._max_body:
            raise WebhookError(400, f"body of {len(body)} bytes exceeds the limit of {self._max_body}")
        events = parser(body, headers)
        return self._act(events, correlation_id)

    def _act(self, events: list[PushEvent], correlation_id: str | None) -> WebhookResult:
        config = self._config()
        results: list[dict[str, Any]] = []
        ignored = 0
        seen: set[str] = set()
        for event in events:
            try:
                image = ImageRef(event.registry, event.repository, event.tag, None)
                image = ImageRef.parse(str(image))  # validates and normalises every part
                # Inside the try: parts that re-parse as a digest reference have no tag (ValueError).
                tagged = image.tagged
            except (InvalidReference, ValueError) as exc:
                raise WebhookError(400, f"invalid image in notification: {exc}") from None
            followed = config.followed.get(tagged)
            if followed is None:
                ignored += 1
                results.append({"image": tagged, "outcome": "ignored", "reason": "not followed"})
                continue
            if tagged in seen:
                continue  # several events for one tag in one delivery: one check is enough
            seen.add(tagged)
            check = self._detector().check(
                followed, trigger="webhook", correlation_id=correlation_id, hint_digest=event.digest
            )
            results.append(check.as_dict())
        accepted = len(results) - ignored
        return WebhookResult(202, {"accepted": accepted, "ignored": ignored, "events": results})
