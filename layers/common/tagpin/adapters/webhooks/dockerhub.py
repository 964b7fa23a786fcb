"""Docker Hub repository webhooks.

One trigger (a push); the payload names the repository and the tag but carries no digest, no
event id and no signature: authentication is a secret token in the URL (see auth.UrlToken),
and the tag is always re-resolved at ``docker.io``. ``callback_url`` (legacy) is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

from tagpin.adapters.webhooks import Payload, decode, epoch_time
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions

REGISTRY = "docker.io"


class PushData(Payload):
    tag: str
    pushed_at: int | float | None = None


class Repository(Payload):
    repo_name: str


class DockerHubPush(Payload):
    push_data: PushData
    repository: Repository


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    push = decode(DockerHubPush, body)
    if not push.push_data.tag:
        return []
    return [
        PushEvent(
            registry=REGISTRY,
            repository=push.repository.repo_name,
            tag=push.push_data.tag,
            digest=None,
            event_time=epoch_time(push.push_data.pushed_at),
            delivery_id=None,
        )
    ]
