"""Harbor webhooks (``PUSH_ARTIFACT``), in both payload formats a policy can choose:

- Default: ``{"type": "PUSH_ARTIFACT", "occur_at": <epoch s>, "event_data": {...}}``;
- CloudEvents (Harbor >= 2.8, ``application/cloudevents+json``): ``{"specversion": "1.0",
  "id", "type": "harbor.artifact.pushed", "time", "data": {...}}``, ``data`` = ``event_data``.

Each resource is one artifact: ``tag``, ``digest`` and ``resource_url`` (``host/project/repo:tag``,
the host clients pull from). A digest-only push (a child of a multi-arch image) has the digest
as its tag and ``@sha256:`` in the URL: skipped. Other event types (pull, delete, scan) are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from tagpin.adapters.webhooks import Payload, decode, epoch_time
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError

PUSH_TYPES = frozenset({"PUSH_ARTIFACT", "harbor.artifact.pushed"})


class Resource(Payload):
    tag: str | None = None
    digest: str | None = None
    resource_url: str


class Repository(Payload):
    repo_full_name: str


class EventData(Payload):
    resources: list[Resource] = Field(max_length=1000)
    repository: Repository


class HarborEvent(Payload):
    type: str
    # Default format
    occur_at: int | float | None = None
    event_data: EventData | None = None
    # CloudEvents format
    specversion: str | None = None
    id: str | None = None
    time: str | None = None
    data: EventData | None = None


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    event = decode(HarborEvent, body)
    if event.type not in PUSH_TYPES:
        return []
    cloud = event.specversion is not None
    data = event.data if cloud else event.event_data
    if data is None:
        raise WebhookError(400, f"{'data' if cloud else 'event_data'}: Field required")
    when = event.time if cloud else epoch_time(event.occur_at)
    pushes = []
    for index, resource in enumerate(data.resources):
        tag = resource.tag or ""
        if not tag or tag.startswith("sha256:") or "@" in resource.resource_url:
            continue  # digest-only push
        host = resource.resource_url.split("/")[0]
        if "/" not in resource.resource_url or not host:
            raise WebhookError(400, f"resources.{index}.resource_url: expected <host>/<repository>:<tag>")
        pushes.append(
            PushEvent(
                host,
                data.repository.repo_full_name,
                tag,
                resource.digest or None,
                when,
                event.id if cloud else None,
            )
        )
    return pushes
