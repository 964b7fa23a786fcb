"""GitHub Packages (GHCR) webhooks: the ``package`` event (and the older ``registry_package``).

The event name is the ``X-GitHub-Event`` header; the inner object sits under the same key.
Kept: actions ``published``/``updated`` of a container package whose version has a tag. Untagged
versions (children of a multi-arch push) and other package types are dropped; any other event
(``ping`` when the hook is created, pushes, issues) is accepted and ignored. The pull host and
path come from ``package_version.package_url`` (``ghcr.io/<owner>/<name>:<tag>``): the
``registry.url`` field is an API host, not where clients pull from. ``X-GitHub-Delivery`` is
the delivery id (not covered by the signature).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from tagpin.adapters.webhooks import Payload, decode
from tagpin.ports.webhooks import NO_OPTIONS, PushEvent, SourceOptions, WebhookError

EVENTS = ("package", "registry_package")
ACTIONS = frozenset({"published", "updated"})
ZERO_TIME = "0001-01-01T00:00:00Z"


class Tag(Payload):
    name: str | None = None
    digest: str | None = None


class ContainerMetadata(Payload):
    tag: Tag | None = None


class PackageVersion(Payload):
    version: str | None = None
    package_url: str | None = None
    updated_at: str | None = None
    container_metadata: ContainerMetadata | None = None


class Package(Payload):
    package_type: str | None = None
    updated_at: str | None = None
    package_version: PackageVersion | None = None


class PackageEvent(Payload):
    action: str
    package: Package | None = None
    registry_package: Package | None = Field(default=None)


def _image_path(package_url: str) -> tuple[str, str]:
    """``ghcr.io/acme/web:1.4`` (or ``...@sha256:...``) -> (host, ``acme/web``)."""
    host, slash, rest = package_url.rsplit("://", maxsplit=1)[-1].partition("/")
    rest = rest.split("@")[0]
    head, _, last = rest.rpartition("/")
    last = last.split(":")[0]
    path = f"{head}/{last}" if head else last
    if not slash or not host or not path:
        raise WebhookError(400, "package_version.package_url: expected <host>/<owner>/<name>:<tag>")
    return host, path.lower()  # GHCR names are case-insensitive; references must be lowercase


def parse(body: bytes, headers: Mapping[str, str], options: SourceOptions = NO_OPTIONS, /) -> list[PushEvent]:
    name = (headers.get("x-github-event") or "").strip()
    if not name:  # every GitHub delivery names its event: without it the request is malformed
        raise WebhookError(400, "X-GitHub-Event header: missing (GitHub names the event of every delivery)")
    if name not in EVENTS:
        return []  # another event (ping, push, ...): nothing to do
    event = decode(PackageEvent, body)
    package = event.package if name == "package" else event.registry_package
    if package is None:
        raise WebhookError(400, f"{name}: Field required")
    if event.action not in ACTIONS or (package.package_type or "").lower() != "container":
        return []
    version = package.package_version
    tag = version.container_metadata.tag if version and version.container_metadata else None
    if version is None or tag is None or not tag.name:
        return []  # an untagged version: a child manifest of a multi-arch image
    if not version.package_url:
        raise WebhookError(400, "package_version.package_url: Field required")
    host, path = _image_path(version.package_url)
    digest = tag.digest or (version.version if (version.version or "").startswith("sha256:") else None)
    when = next((t for t in (version.updated_at, package.updated_at) if t and t != ZERO_TIME), None)
    return [PushEvent(host, path, tag.name, digest, when, headers.get("x-github-delivery") or None)]
