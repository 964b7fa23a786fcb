"""Sonatype Nexus Repository 3 webhooks (Repository webhook, ``component`` events).

``X-Nexus-Webhook-Id: rm:repository:component``; body ``{"timestamp", "repositoryName",
"action": "CREATED"|"UPDATED"|"DELETED", "component": {"format", "name", "version"}}``. For a
docker component ``name`` is the image path and ``version`` the tag; the payload has neither a
digest nor the host clients pull from, so the pull prefix per Nexus repository comes from the
source's ``registries`` setting (e.g. ``{"docker-hosted": "nexus.example.com:8443"}``, or ``"*"``
for every repository). ``X-Nexus-Webhook-Delivery`` is the delivery id.
"""

from __future__ import annotations

from collections.abc import Mapping

from tagpin.adapters.webhooks import Payload, decode, split_prefix
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError

WEBHOOK_ID = "rm:repository:component"
ACTIONS = frozenset({"CREATED", "UPDATED"})


class Component(Payload):
    format: str | None = None
    name: str
    version: str | None = None


class NexusEvent(Payload):
    timestamp: str | None = None
    repositoryName: str
    action: str
    component: Component


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    hook = headers.get("x-nexus-webhook-id")
    if hook is not None and hook != WEBHOOK_ID:
        return []  # asset or audit events
    event = decode(NexusEvent, body)
    component = event.component
    if event.action not in ACTIONS or component.format != "docker" or not component.version:
        return []
    prefix = options.prefix(event.repositoryName)
    if prefix is None:
        raise WebhookError(
            400,
            f"no pull host is configured for Nexus repository {event.repositoryName[:100]!r} "
            "(set 'registries' in the webhook secret's nexus entry)",
        )
    host, repository = split_prefix(prefix, component.name)
    delivery = headers.get("x-nexus-webhook-delivery") or None
    return [PushEvent(host, repository, component.version, None, event.timestamp, delivery)]
