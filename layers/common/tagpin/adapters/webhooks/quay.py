"""Quay.io and self-hosted Quay "Repository Push" notifications (webhook method).

Body: ``repository`` (``ns/name``), ``docker_url`` (``<server-hostname>/<ns>/<name>``, which gives
the pull host of a self-hosted Quay) and ``updated_tags`` (one event per tag). No digest, no
event id, no signature: authentication is a secret token in the URL.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from tagpin.adapters.webhooks import Payload, decode
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError

MAX_TAGS = 100


class QuayPush(Payload):
    repository: str
    docker_url: str
    updated_tags: list[str] = Field(max_length=MAX_TAGS)


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    push = decode(QuayPush, body)
    host = push.docker_url.split("://")[-1].split("/")[0]
    if not host:
        raise WebhookError(400, "docker_url: expected <host>/<namespace>/<name>")
    return [
        PushEvent(host, push.repository, tag, None, None, None)
        for tag in dict.fromkeys(push.updated_tags)
        if tag
    ]
