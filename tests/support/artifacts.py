"""An OCI registry in memory for signature checks: the ``ArtifactReader`` of ``tagpin.ports.registry``
(manifests by tag or digest, blobs, referrers computed from the manifests' ``subject``), with the
client's checks (digests, size bounds) and failures to script."""

from __future__ import annotations

import hashlib
import json

from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import (
    ArtifactReader,
    BlobNotFound,
    ContentMismatch,
    ContentTooLarge,
    Descriptor,
    ManifestNotFound,
    RegistryError,
)
from tagpin_local.cosign import Artifact


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class MemoryRegistry:
    """One repository's content (the repository of the refs is not checked). ``tags`` maps tags to
    manifest digests; ``fail`` maps what to fail to an exception: ``"manifest:<reference>"``,
    ``"blob:<digest>"``, ``"referrers"``. ``reads`` records each read, in order."""

    def __init__(self) -> None:
        self.manifests: dict[str, tuple[str, bytes]] = {}
        self.tags: dict[str, str] = {}
        self.blobs: dict[str, bytes] = {}
        self.fail: dict[str, Exception] = {}
        self.reads: list[str] = []

    def put(self, artifact: Artifact, tag: str | None = None) -> str:
        self.blobs.update(artifact.blobs)
        self.manifests[artifact.digest] = (artifact.media_type, artifact.body)
        if tag is not None:
            self.tags[tag] = artifact.digest
        return artifact.digest

    def put_image(self, tag: str = "v1") -> tuple[str, bytes]:
        """A small image manifest under ``tag``: (digest, manifest bytes)."""
        layer = f"layer of {tag} {len(self.manifests)}".encode()
        body = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": sha256(b"{}"),
                    "size": 2,
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": sha256(layer),
                        "size": len(layer),
                    }
                ],
            }
        ).encode()
        digest = self.put(
            Artifact("application/vnd.oci.image.manifest.v1+json", body, {sha256(layer): layer}), tag
        )
        return digest, body

    def _check(self, key: str) -> None:
        self.reads.append(key)
        if key in self.fail:
            raise self.fail[key]

    def fetch_manifest(self, ref: ImageRef, *, max_bytes: int | None = None) -> tuple[str, bytes]:
        reference = ref.digest or ref.tag or "latest"
        self._check(f"manifest:{reference}")
        digest = ref.digest or self.tags.get(reference)
        if digest is None or digest not in self.manifests:
            raise ManifestNotFound(f"{reference}: manifest unknown", host=ref.registry, status=404)
        media_type, body = self.manifests[digest]
        if max_bytes is not None and len(body) > max_bytes:
            raise ContentTooLarge(f"manifest {reference} over {max_bytes}", host=ref.registry, status=200)
        if ref.digest and sha256(body) != ref.digest:
            raise ContentMismatch(f"manifest {reference} does not hash to it", host=ref.registry, status=200)
        return media_type, body

    def fetch_blob(self, ref: ImageRef, digest: str, max_bytes: int) -> bytes:
        self._check(f"blob:{digest}")
        if digest not in self.blobs:
            raise BlobNotFound(f"blob {digest} unknown", host=ref.registry, status=404)
        body = self.blobs[digest]
        if len(body) > max_bytes:
            raise ContentTooLarge(f"blob {digest} over {max_bytes}", host=ref.registry, status=200)
        if sha256(body) != digest:
            raise ContentMismatch(f"blob {digest} does not hash to it", host=ref.registry, status=200)
        return body

    def referrers(self, ref: ImageRef, digest: str, *, artifact_type: str | None = None) -> list[Descriptor]:
        self._check("referrers")
        out = []
        for manifest_digest, (media_type, body) in self.manifests.items():
            doc = json.loads(body)
            subject = doc.get("subject") if isinstance(doc, dict) else None
            if not isinstance(subject, dict) or subject.get("digest") != digest:
                continue
            kind = doc.get("artifactType") or doc.get("config", {}).get("mediaType", "")
            if artifact_type is None or kind == artifact_type:
                out.append(Descriptor(media_type, manifest_digest, len(body), kind))
        return out


def transient(what: str = "registry") -> RegistryError:
    return RegistryError(f"{what}: HTTP 503", host="registry.test", status=503)


_reader: ArtifactReader = MemoryRegistry()
