"""What a registry's answer to a manifest request means, for ``RegistryClient``: the error a status
stands for, the manifest's digest (verified against the exact bytes), its media type and schema
version as the body gives them, and Docker schema1 refused."""

from __future__ import annotations

import hashlib
import json

from tagpin.adapters.registry.http import HttpResponse
from tagpin.adapters.registry.resilience import parse_retry_after
from tagpin.domain.refs import ImageRef, is_digest
from tagpin.ports.registry import MANIFEST_TYPES, AuthError, ManifestNotFound, RegistryError

SCHEMA1_TYPES = frozenset(
    {
        "application/vnd.docker.distribution.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v1+prettyjws",
    }
)
# A manifest or index read whole (the GET fallback of a resolution): the OCI distribution spec
# asks registries to accept manifests of up to 4 MiB; a longer answer is refused, not read.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
_HASHES = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


def check_status(response: HttpResponse, host: str, ref: ImageRef) -> None:
    """Nothing for a 2xx; else the error the status stands for."""
    status = response.status
    if 200 <= status < 300:
        return
    if status == 404:
        raise ManifestNotFound(f"{host}: manifest for {ref} not found", host=host, status=status)
    if status in (401, 403):
        raise AuthError(f"{host}: access to {ref} denied (HTTP {status})", host=host, status=status)
    if status == 429:
        raise RegistryError(
            f"{host}: rate limited (HTTP 429) resolving {ref}",
            host=host,
            status=status,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
        )
    raise RegistryError(f"{host}: HTTP {status} resolving {ref}", host=host, status=status)


def verified_digest(response: HttpResponse, host: str, ref: ImageRef, expected: str | None = None) -> str:
    """The digest of the exact bytes, or the one the registry (``Docker-Content-Digest``) or the
    caller (``expected``) claims once it is checked against them."""
    body = response.body
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    for claimed in (response.headers.get("docker-content-digest"), expected):
        if not claimed:
            continue
        algorithm, _, hexpart = claimed.partition(":")
        hasher = _HASHES.get(algorithm)
        if not is_digest(claimed) or hasher is None or hasher(body).hexdigest() != hexpart:
            raise RegistryError(
                f"{host}: Docker-Content-Digest {claimed!r} does not match the manifest of {ref}",
                host=host,
                status=response.status,
            )
        digest = claimed
    return digest


def body_info(body: bytes) -> tuple[str, int | None]:
    """(mediaType, schemaVersion) of a manifest body, as far as they can be read."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # nested past the parser's depth: unreadable too
        return "", None
    if not isinstance(doc, dict):
        return "", None
    media_type, version = doc.get("mediaType"), doc.get("schemaVersion")
    return (media_type if isinstance(media_type, str) else ""), (
        version if isinstance(version, int) else None
    )


def manifest_type(response: HttpResponse, host: str, ref: ImageRef) -> str:
    """The media type of a manifest a GET answered (its Content-Type, else its body's, e.g. served
    as application/json). Docker schema1 is refused, and so is an answer that is no manifest by
    either (neither a manifest type nor ``schemaVersion`` 2: a proxy's HTML page, an error
    document), whose bytes are no image's digest."""
    body_type, schema_version = body_info(response.body)
    media_type = response.media_type
    reject_schema1(media_type, host, ref)
    if body_type and media_type not in MANIFEST_TYPES:
        media_type = body_type
    if schema_version == 1:
        reject_schema1(f"schemaVersion 1 ({media_type or 'no media type'})", host, ref, always=True)
    if media_type not in MANIFEST_TYPES and schema_version != 2:
        raise RegistryError(
            f"{host}: the answer for {ref} is not a manifest ({media_type[:80] or 'no media type'}, "
            f"{len(response.body)} bytes)",
            host=host,
            status=response.status,
        )
    return media_type


def reject_schema1(media_type: str, host: str, ref: ImageRef, *, always: bool = False) -> None:
    if always or media_type in SCHEMA1_TYPES:
        raise RegistryError(
            f"{host} served a Docker schema1 manifest ({media_type}) for {ref}; schema1 is not supported",
            host=host,
        )
