"""CNCF distribution (registry:2/3, GitLab's registry) notifications.

Envelope ``{"events": [...]}`` with media type ``application/vnd.docker.distribution.events.v1+json``
(v2 in distribution 3.x). Keep manifest pushes with a tag; drop blob events, pulls, deletes and
digest-only pushes (children of a multi-arch index).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError

MEDIA_TYPES = (
    "application/vnd.docker.distribution.events.v1+json",
    "application/vnd.docker.distribution.events.v2+json",
    "application/json",
)
MANIFEST_TYPES = frozenset(
    {
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    }
)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type and content_type not in MEDIA_TYPES:
        raise WebhookError(415, f"unsupported content type {content_type!r}; expected {MEDIA_TYPES[0]}")
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise WebhookError(400, f"body is not valid JSON: {exc}") from None
    except RecursionError:  # deeply nested arrays/objects: the C decoder gives up, not a 5xx
        raise WebhookError(400, "body is not valid JSON: nested too deeply") from None
    if not isinstance(document, dict) or not isinstance(document.get("events"), list):
        raise WebhookError(400, "expected a JSON object with an 'events' list")
    events: list[PushEvent] = []
    for index, event in enumerate(document["events"]):
        if not isinstance(event, dict):
            raise WebhookError(400, f"events[{index}] is not an object")
        target = event.get("target")
        request = event.get("request") or {}
        if not isinstance(target, dict) or not isinstance(request, dict):
            raise WebhookError(400, f"events[{index}]: 'target' and 'request' must be objects")
        if event.get("action") != "push" or _str(target.get("mediaType")) not in MANIFEST_TYPES:
            continue
        tag, repository, host = (
            _str(target.get("tag")),
            _str(target.get("repository")),
            _str(request.get("host")),
        )
        if tag is None:
            continue  # digest-only push: a child of an index, or an untagged artifact
        if repository is None or host is None:
            raise WebhookError(
                400, f"events[{index}]: a manifest push needs target.repository and request.host"
            )
        events.append(
            PushEvent(
                registry=host,
                repository=repository,
                tag=tag,
                digest=_str(target.get("digest")),
                event_time=_str(event.get("timestamp")),
                delivery_id=_str(event.get("id")),
            )
        )
    return events
