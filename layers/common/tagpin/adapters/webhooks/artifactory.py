"""JFrog Artifactory webhooks: domain ``docker``, event ``pushed``.

Current envelope: ``{"domain": "docker", "event_type": "pushed", "jpd_origin": "https://acme.jfrog.io",
"data": {"repo_key", "image_name", "tag", "sha256", ...}}``; the older envelope has the ``data``
fields at the top level. ``sha256`` is the manifest's checksum (hex), used as the digest hint.
The pull prefix depends on the Docker access method: by default the repository-path method,
``<host of jpd_origin>/<repo_key>``; the source's ``registries`` setting overrides it per
``repo_key`` (subdomain or port methods, e.g. ``{"docker-local": "docker-local.acme.jfrog.io"}``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from tagpin.adapters.webhooks import Payload, decode, split_prefix
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError

_HEX64 = re.compile(r"[0-9a-f]{64}")


class DockerData(Payload):
    repo_key: str | None = None
    image_name: str | None = None
    tag: str | None = None
    sha256: str | None = None


class ArtifactoryEvent(DockerData):
    domain: str
    event_type: str
    jpd_origin: str | None = None
    data: DockerData | None = None


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    event = decode(ArtifactoryEvent, body)
    if event.domain != "docker" or event.event_type != "pushed":
        return []
    data = event.data or event
    if not data.tag:
        return []
    if not data.repo_key or not data.image_name:
        raise WebhookError(400, "data: a docker push needs repo_key and image_name")
    prefix = options.prefix(data.repo_key)
    if prefix is None:
        try:
            origin = urlsplit(event.jpd_origin or "").netloc
        except ValueError:
            origin = ""
        if not origin:
            raise WebhookError(
                400,
                f"no pull host for Artifactory repository {data.repo_key[:100]!r}: the event has no "
                "jpd_origin and 'registries' in the webhook secret does not name it",
            )
        prefix = f"{origin}/{data.repo_key}"
    host, repository = split_prefix(prefix, data.image_name)
    sha = (data.sha256 or "").lower()
    digest = f"sha256:{sha}" if _HEX64.fullmatch(sha) else None
    return [PushEvent(host, repository, data.tag, digest, None, None)]
