"""Attestation-only index changes (per registry, ``ignore_attestation_changes``).

BuildKit adds provenance/SBOM attestation manifests (platform ``unknown/unknown``, annotation
``vnd.docker.reference.type: attestation-manifest``) to an image index; a reproducible rebuild
then changes the index digest without changing any platform's image. When a registry is
configured to ignore that, such a move is no change: not recorded, not enqueued, nothing rolls.
One filter serves the poller and the webhook path alike.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

from tagpin.domain.config import Registry
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import ManifestFetcher, RegistryError, Resolution

logger = logging.getLogger(__name__)

ATTESTATION_TYPE = "attestation-manifest"


def platform_manifests(body: bytes) -> set[tuple[str, str]] | None:
    """(digest, platform) of an index's entries, attestations left out; None if not an index."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    manifests = doc.get("manifests") if isinstance(doc, dict) else None
    if not isinstance(manifests, list):
        return None
    out: set[tuple[str, str]] = set()
    for entry in manifests:
        if not isinstance(entry, dict):
            return None
        annotations = entry.get("annotations") or {}
        platform = entry.get("platform") or {}
        if annotations.get("vnd.docker.reference.type") == ATTESTATION_TYPE or (
            platform.get("os") == "unknown" and platform.get("architecture") == "unknown"
        ):
            continue
        out.add((str(entry.get("digest")), json.dumps(platform, sort_keys=True)))
    return out


class AttestationFilter:
    def __init__(self, fetcher: ManifestFetcher, settings: Callable[[str], Registry]) -> None:
        self._fetcher = fetcher
        self._settings = settings
        self._verdicts: dict[tuple[str, str], bool] = {}  # (old, new) -> verdict, warm cache
        self._lock = threading.Lock()

    def enabled(self, ref: ImageRef) -> bool:
        return self._settings(ref.registry).ignore_attestation_changes

    def only_attestations(self, ref: ImageRef, old: str | None, new: Resolution) -> bool:
        """True when the registry ignores attestation changes and ``old`` and ``new`` are indexes
        with the same platform manifests."""
        if not old or old == new.digest or not new.is_index or not self.enabled(ref):
            return False
        key = (old, new.digest)
        with self._lock:
            if key in self._verdicts:
                return self._verdicts[key]
        try:
            _t, old_body = self._fetcher.fetch_manifest(ref.with_digest(old))
            _t, new_body = self._fetcher.fetch_manifest(ref.with_digest(new.digest))
        except RegistryError as exc:  # e.g. the old index is gone: treat it as a real change
            logger.info("cannot compare indexes; treating as a change", extra={"error": str(exc)})
            return False
        before, after = platform_manifests(old_body), platform_manifests(new_body)
        verdict = before is not None and before == after
        with self._lock:
            self._verdicts[key] = verdict
        if verdict:
            logger.info(
                "index changed only in its attestations; not rolling",
                extra={"image": ref.tagged, "digest": new.digest, "kept": old},
            )
        return verdict
