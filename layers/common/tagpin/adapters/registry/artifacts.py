"""Blobs and referrers: what signature verification reads besides manifests.

- ``GET /v2/<name>/blobs/<digest>``: read at most ``max_bytes`` (a longer blob is refused as soon as
  it passes the bound, never held whole) and hashed: bytes that do not hash to the digest asked for
  are refused (``ContentMismatch``), so a caller never sees content other than what it named.
- OCI 1.1 referrers (distribution-spec "Listing Referrers"): ``GET /v2/<name>/referrers/<digest>``
  answers an OCI image index of the manifests whose ``subject`` is that digest, optionally filtered
  by ``?artifactType=`` (a registry may ignore the filter: it is applied here again), paginated by a
  ``Link: <...>; rel="next"`` header. A registry without the API (CNCF distribution 2.x, most of
  the registries before 2023) answers 404, or something that is not an index: then, as the spec
  asks, the referrers tag schema: the tag ``<alg>-<hex>`` (``sha256-<hex>``) holds an OCI index of
  the referrers, kept up to date by whoever pushes them (cosign, oras, notation).

Everything served is untrusted: descriptors with a malformed digest, a negative size or fields of
the wrong type are dropped (and counted in the log, never quoted at length); lists are cut at
``ArtifactLimits.max_referrers``; a next-page Link elsewhere than this repository's referrers path
on the same origin is not followed (the registry token would go with it).

``RegistryClient.fetch_blob`` and ``RegistryClient.referrers`` run these through ``ArtifactReads``:
the client's auth, retries, circuit breaker and concurrency bounds.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urljoin

from tagpin.adapters.registry.auth import RegistryAuth
from tagpin.adapters.registry.bounds import Slot
from tagpin.adapters.registry.http import BodyTooLarge, HttpResponse
from tagpin.adapters.registry.resilience import CircuitBreaker, parse_retry_after
from tagpin.adapters.registry.tags import next_link, own_link
from tagpin.domain.refs import ImageRef, is_digest
from tagpin.ports.registry import (
    INDEX_TYPES,
    OCI_INDEX,
    RETRY_STATUSES,
    AuthError,
    BlobNotFound,
    ContentMismatch,
    ContentTooLarge,
    Descriptor,
    ManifestNotFound,
    RegistryAccess,
    RegistryError,
    RegistryUnavailable,
)

log = logging.getLogger(__name__)

_HASHES = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}
MAX_ANNOTATIONS = 32  # per descriptor; more are dropped
MAX_ANNOTATION_CHARS = 64 * 1024  # a cosign signature or certificate annotation fits easily


@dataclass(frozen=True)
class ArtifactLimits:
    max_referrers: int = 64  # descriptors kept from one referrers listing (all pages together)
    max_pages: int = 4  # referrers API pages followed
    max_index_bytes: int = 1024 * 1024  # one referrers page or referrers-tag index

    def __post_init__(self) -> None:
        if min(self.max_referrers, self.max_pages, self.max_index_bytes) < 1:
            raise ValueError(f"artifact limits must be positive: {self}")


# One GET through the client: (url, Accept, max_body) -> the response. Transient answers (no answer,
# 429, 5xx after the client's retries) raise RegistryError; any other status is returned.
type Get = Callable[[str, str, int], Awaitable[HttpResponse]]
# The referrers tag's manifest (media type, body), None when the tag does not exist.
type TagIndex = Callable[[str], Awaitable[tuple[str, bytes] | None]]


def check_digest(digest: str) -> tuple[str, str]:
    """(algorithm, hex) of a digest this module can verify; ValueError for anything else."""
    algorithm, _, hexpart = digest.partition(":") if isinstance(digest, str) else ("", "", "")
    if not is_digest(digest) or algorithm not in _HASHES:
        raise ValueError(f"not a verifiable digest: {str(digest)[:80]!r}")
    return algorithm, hexpart


def verify_content(body: bytes, digest: str, host: str, what: str) -> None:
    algorithm, hexpart = check_digest(digest)
    if _HASHES[algorithm](body).hexdigest() != hexpart:
        raise ContentMismatch(f"{host}: {what} does not hash to {digest}", host=host, status=200)


def referrers_tag(digest: str) -> str:
    """The referrers tag schema's tag for ``digest``: ``sha256:ab..`` -> ``sha256-ab..``."""
    algorithm, hexpart = check_digest(digest)
    return f"{algorithm}-{hexpart}"


def _raise_for(response: HttpResponse, host: str, what: str) -> None:
    status = response.status
    if 200 <= status < 300:
        return
    if status in (401, 403):
        raise AuthError(f"{host}: access to {what} denied (HTTP {status})", host=host, status=status)
    retry_after = parse_retry_after(response.headers.get("retry-after")) if status == 429 else None
    raise RegistryError(f"{host}: HTTP {status} on {what}", host=host, status=status, retry_after=retry_after)


async def fetch_blob(get: Get, base_url: str, host: str, name: str, digest: str, max_bytes: int) -> bytes:
    """The blob ``digest`` of repository ``name``, verified, at most ``max_bytes`` long."""
    check_digest(digest)
    what = f"blob {digest} of {name}"
    try:
        response = await get(f"{base_url}/v2/{name}/blobs/{digest}", "*/*", max_bytes)
    except BodyTooLarge as exc:
        raise ContentTooLarge(
            f"{host}: {what} is over {max_bytes} bytes", host=host, status=exc.status
        ) from None
    if response.status == 404:
        raise BlobNotFound(f"{host}: {what} not found", host=host, status=404)
    _raise_for(response, host, what)
    verify_content(response.body, digest, host, what)
    return response.body


def _descriptor(entry: Any) -> Descriptor | None:
    """A descriptor from an index entry, or None when it is not a well-formed one."""
    if not isinstance(entry, dict):
        return None
    media_type, digest, size = entry.get("mediaType"), entry.get("digest"), entry.get("size")
    artifact_type = entry.get("artifactType", "")
    if not (isinstance(media_type, str) and isinstance(digest, str) and is_digest(digest)):
        return None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return None
    if not isinstance(artifact_type, str) or len(media_type) > 255 or len(artifact_type) > 255:
        return None
    raw = entry.get("annotations") or {}
    annotations: dict[str, str] = {}
    if isinstance(raw, dict):
        for key, value in list(raw.items())[:MAX_ANNOTATIONS]:
            if isinstance(key, str) and isinstance(value, str) and len(value) <= MAX_ANNOTATION_CHARS:
                annotations[key[:255]] = value
    return Descriptor(media_type, digest, size, artifact_type, annotations)


def index_descriptors(body: bytes) -> tuple[list[Descriptor], int] | None:
    """(well-formed descriptors, entries dropped) of an image index body; None when the body is not
    an image index (not JSON, not an object, no ``manifests`` array)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    manifests = doc.get("manifests") if isinstance(doc, dict) else None
    media_type = doc.get("mediaType", OCI_INDEX) if isinstance(doc, dict) else None
    if not isinstance(manifests, list) or media_type not in INDEX_TYPES:
        return None
    found = [d for d in map(_descriptor, manifests) if d is not None]
    return found, len(manifests) - len(found)


def _keep(found: list[Descriptor], out: dict[str, Descriptor], artifact_type: str | None, limit: int) -> bool:
    """Add the descriptors of ``artifact_type`` (all without one) to ``out`` once each; False when
    ``limit`` is reached."""
    for desc in found:
        if artifact_type is not None and desc.artifact_type != artifact_type:
            continue
        if len(out) >= limit:
            return False
        out.setdefault(desc.digest, desc)
    return True


async def list_referrers(
    get: Get,
    tag_index: TagIndex,
    base_url: str,
    host: str,
    name: str,
    digest: str,
    artifact_type: str | None,
    limits: ArtifactLimits,
) -> list[Descriptor]:
    """The referrers of ``digest`` in repository ``name``: the referrers API, else the tag schema."""
    check_digest(digest)
    path = f"/v2/{name}/referrers/{digest}"
    url = base_url + path + (f"?{urlencode({'artifactType': artifact_type})}" if artifact_type else "")
    out: dict[str, Descriptor] = {}
    dropped = 0
    seen: set[str] = set()
    for page in range(limits.max_pages):
        seen.add(url)
        try:
            response = await get(url, OCI_INDEX, limits.max_index_bytes)
        except BodyTooLarge:
            raise ContentTooLarge(
                f"{host}: a referrers page of {name}@{digest} is over {limits.max_index_bytes} bytes",
                host=host,
                status=200,
            ) from None
        parsed = index_descriptors(response.body) if 200 <= response.status < 300 else None
        if parsed is None:
            if page == 0 and response.status in (200, 400, 404, 405):
                return await _from_tag(tag_index, host, name, digest, artifact_type, limits)
            _raise_for(response, host, f"the referrers of {name}@{digest}")
            raise RegistryError(
                f"{host}: malformed referrers page for {name}@{digest}", host=host, status=200
            )
        found, bad = parsed
        dropped += bad
        if not _keep(found, out, artifact_type, limits.max_referrers):
            log.warning("%s: more than %d referrers of %s@%s; the rest ignored", host, len(out), name, digest)
            break
        link = next_link(response.headers.get_list("link"))
        if link is None:
            break
        target = urljoin(url, link)
        if not own_link(target, base_url, path) or target in seen:
            log.warning("%s: not following the next-page Link of the referrers of %s", host, name)
            break
        url = target
    if dropped:
        log.warning("%s: dropped %d malformed referrer descriptor(s) of %s@%s", host, dropped, name, digest)
    return list(out.values())


async def _from_tag(
    tag_index: TagIndex,
    host: str,
    name: str,
    digest: str,
    artifact_type: str | None,
    limits: ArtifactLimits,
) -> list[Descriptor]:
    tag = referrers_tag(digest)
    found = await tag_index(tag)
    if found is None:
        return []
    parsed = index_descriptors(found[1])
    if parsed is None:
        log.warning("%s: the referrers tag %s:%s is not an image index; ignored", host, name, tag)
        return []
    descriptors, dropped = parsed
    if dropped:
        log.warning("%s: dropped %d malformed descriptor(s) from %s:%s", host, dropped, name, tag)
    out: dict[str, Descriptor] = {}
    if not _keep(descriptors, out, artifact_type, limits.max_referrers):
        log.warning("%s: more than %d referrers in %s:%s; the rest ignored", host, len(out), name, tag)
    return list(out.values())


# --- through the client ---------------------------------------------------------------------------

DOCKER_HUB, DOCKER_HUB_API = "docker.io", "registry-1.docker.io"


class ArtifactReads:
    """``fetch_blob`` and ``referrers`` for ``RegistryClient``, in its loop thread, with its auth
    (``auth``), circuit breakers (``breaker``), concurrency bounds (``bounds``: ``Bounds.hold``) and
    bounded manifest GET (``fetch``, for the referrers tag)."""

    def __init__(
        self,
        auth: RegistryAuth,
        breaker: Callable[[str], CircuitBreaker],
        bounds: Callable[[str, RegistryAccess], Slot],
        fetch: Callable[[ImageRef, RegistryAccess, int | None], Awaitable[tuple[str, bytes]]],
        limits: ArtifactLimits,
    ) -> None:
        self._auth, self._breaker, self._bounds, self._fetch = auth, breaker, bounds, fetch
        self.limits = limits

    @staticmethod
    def _where(ref: ImageRef, access: RegistryAccess) -> tuple[str, str]:
        host = DOCKER_HUB_API if ref.registry == DOCKER_HUB else ref.registry
        return host, f"{'http' if access.insecure else 'https'}://{host}"

    async def fetch_blob(self, ref: ImageRef, digest: str, max_bytes: int, access: RegistryAccess) -> bytes:
        host, base = self._where(ref, access)
        return await fetch_blob(self._get(ref, access, host), base, host, ref.repository, digest, max_bytes)

    async def referrers(
        self, ref: ImageRef, digest: str, artifact_type: str | None, access: RegistryAccess
    ) -> list[Descriptor]:
        host, base = self._where(ref, access)

        async def tag_index(tag: str) -> tuple[str, bytes] | None:
            try:
                return await self._fetch(
                    ImageRef(ref.registry, ref.repository, tag), access, self.limits.max_index_bytes
                )
            except ManifestNotFound:
                return None

        get = self._get(ref, access, host)
        return await list_referrers(
            get, tag_index, base, host, ref.repository, digest, artifact_type, self.limits
        )

    def _get(self, ref: ImageRef, access: RegistryAccess, host: str) -> Get:
        """A GET with the breaker, the bounds, auth and retries of a resolution; what is still
        transient after the retries (no answer, 429, 5xx) raises and counts against the breaker."""
        scope = f"repository:{ref.repository}:pull"
        breaker = self._breaker(host)

        async def get(url: str, accept: str, max_body: int) -> HttpResponse:
            breaker.check(host)
            try:
                async with self._bounds(host, access):
                    breaker.check(host)  # it may have opened while this one waited
                    response = await self._auth.request(
                        "GET", url, host, scope, access, {"Accept": accept}, max_body=max_body
                    )
                if response.status in RETRY_STATUSES:
                    raise RegistryError(
                        f"{host}: HTTP {response.status} on GET {url}",
                        host=host,
                        status=response.status,
                        retry_after=parse_retry_after(response.headers.get("retry-after")),
                    )
            except RegistryError as exc:
                if exc.transient and not isinstance(exc, RegistryUnavailable):
                    breaker.failure(str(exc), open_for=exc.retry_after)
                raise
            breaker.success()
            return response

        return get
