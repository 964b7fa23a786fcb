"""Reading signature material from the registry, bounded, with failures sorted into verdicts.

Everything here comes from the registry and is untrusted: manifests and blobs are read with a size
bound and checked against their digests (``ArtifactReader``), at most ``max_signatures`` layers or
referrers are looked at, and a failure becomes a ``ReadProblem``: ``MALFORMED`` when the registry
served something unusable (a listed blob missing, content not matching its digest, too large),
``UNAVAILABLE`` when it did not answer or refused (retry later), ``UNSUPPORTED`` on a HEAD-only
registry (``GetsDisabled``: a manifest GET would count against its pull limit, so signatures cannot
be read there; retrying would not change that). ``ManifestNotFound`` for a tag is left to the
caller: no ``.sig`` tag simply means no signatures of that kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tagpin.adapters.signatures.keys import TrustedKey
from tagpin.domain.refs import ImageRef, is_digest
from tagpin.ports.registry import (
    ArtifactReader,
    BlobNotFound,
    ContentMismatch,
    ContentTooLarge,
    GetsDisabled,
    ManifestNotFound,
    RegistryError,
)
from tagpin.ports.signatures import SignatureProblem


@dataclass(frozen=True)
class SignatureLimits:
    max_signatures: int = 20  # signature layers of a .sig manifest, and referrers, looked at (each)
    max_payload_bytes: int = 64 * 1024  # a simple-signing payload or a Sigstore bundle
    max_manifest_bytes: int = 256 * 1024  # a .sig manifest (one layer per signature) or a referrer

    def __post_init__(self) -> None:
        if min(self.max_signatures, self.max_payload_bytes, self.max_manifest_bytes) < 1:
            raise ValueError(f"signature limits must be positive: {self}")


class ReadProblem(Exception):
    def __init__(self, problem: SignatureProblem, detail: str) -> None:
        super().__init__(detail)
        self.problem = problem
        self.detail = detail


def _short(exc: RegistryError) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "..."


@dataclass(frozen=True)
class Reading:
    """One check: the registry, the image's repository, the digest, the keys and the bounds."""

    registry: ArtifactReader
    repository: ImageRef  # registry/repository, without tag or digest
    digest: str
    keys: tuple[TrustedKey, ...]
    limits: SignatureLimits

    def manifest(self, reference: str) -> bytes:
        """A manifest by tag (``ManifestNotFound`` passes) or by digest (then missing is MALFORMED)."""
        by_digest = is_digest(reference)
        ref = self.repository.with_digest(reference) if by_digest else self.repository.with_tag(reference)
        try:
            _media_type, body = self.registry.fetch_manifest(ref, max_bytes=self.limits.max_manifest_bytes)
        except ManifestNotFound as exc:
            if not by_digest:
                raise
            raise ReadProblem(SignatureProblem.MALFORMED, f"listed manifest missing: {_short(exc)}") from None
        except (ContentMismatch, ContentTooLarge) as exc:
            raise ReadProblem(SignatureProblem.MALFORMED, _short(exc)) from None
        except GetsDisabled as exc:
            raise ReadProblem(SignatureProblem.UNSUPPORTED, _short(exc)) from None
        except RegistryError as exc:
            raise ReadProblem(SignatureProblem.UNAVAILABLE, _short(exc)) from None
        return body

    def blob(self, descriptor: dict[str, Any], max_bytes: int | None = None) -> bytes:
        """The blob a manifest's layer descriptor names, at most ``max_payload_bytes``."""
        limit = max_bytes or self.limits.max_payload_bytes
        digest, size = descriptor.get("digest"), descriptor.get("size")
        if not isinstance(digest, str) or not is_digest(digest):
            raise ReadProblem(SignatureProblem.MALFORMED, "a layer without a valid digest")
        if isinstance(size, int) and size > limit:
            raise ReadProblem(SignatureProblem.MALFORMED, f"a layer of {size} bytes, over {limit}")
        try:
            return self.registry.fetch_blob(self.repository, digest, limit)
        except (BlobNotFound, ContentMismatch, ContentTooLarge) as exc:
            raise ReadProblem(SignatureProblem.MALFORMED, _short(exc)) from None
        except RegistryError as exc:
            raise ReadProblem(SignatureProblem.UNAVAILABLE, _short(exc)) from None


def candidate_layers(body: bytes, limit: int) -> list[dict[str, Any]] | None:
    """The first ``limit`` layer descriptors (objects) of an image manifest; None when ``body`` is
    not one."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    layers = doc.get("layers") if isinstance(doc, dict) else None
    if not isinstance(layers, list):
        return None
    return [layer for layer in layers[:limit] if isinstance(layer, dict)]
