"""Sign images the way cosign does, without cosign: for tests, end-to-end runs and the demo.

- ``Signer``: an ECDSA P-256 or Ed25519 key pair (``cryptography``), with its PEM public key (what
  a ``SignaturePolicy`` lists) and its id (``sha256:<hex>`` of the SubjectPublicKeyInfo; base64 of
  the hash as a bundle's ``hint``, as cosign writes it).
- ``sign_image``: ``cosign sign --key``: a simple-signing payload for the digest, signed, pushed as
  a layer of the manifest under ``sha256-<hex>.sig`` (appended when the tag exists, as cosign does).
- ``key_bundle`` and ``attach_bundle``: cosign's new bundle format with a key: a Sigstore bundle
  (message signature over the image manifest, or a DSSE envelope of an in-toto statement about the
  digest) in an OCI 1.1 referrer manifest, whose ``subject`` is the image; listed in the referrers
  tag schema's index ``sha256-<hex>`` (for registries without the referrers API, such as the CNCF
  registry 2.8 the tests run) unless ``tag_schema=False``.

The builders (``simple_signing_payload``, ``signature_artifact``, ``bundle_artifact``) return
``Artifact`` values, so tests can store the same content in an in-memory registry.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from tagpin_local.oci import OCI_INDEX, OCI_MANIFEST, put_manifest, upload_blob

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
PAYLOAD_TYPE = "cosign container image signature"
BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"
IN_TOTO = "application/vnd.in-toto+json"
STATEMENT_V1 = "https://in-toto.io/Statement/v1"
COSIGN_SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


@dataclass(frozen=True)
class Signer:
    """A signing key: ECDSA P-256 (DER signatures over SHA-256) or Ed25519."""

    private_key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey = field(repr=False)

    @classmethod
    def generate(cls, kind: Literal["ecdsa-p256", "ed25519"] = "ecdsa-p256") -> Signer:
        if kind == "ed25519":
            return cls(ed25519.Ed25519PrivateKey.generate())
        return cls(ec.generate_private_key(ec.SECP256R1()))

    def sign(self, data: bytes) -> bytes:
        if isinstance(self.private_key, ed25519.Ed25519PrivateKey):
            return self.private_key.sign(data)
        return self.private_key.sign(data, ec.ECDSA(hashes.SHA256()))

    def _der(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    @property
    def public_pem(self) -> str:
        return (
            self.private_key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )

    @property
    def key_id(self) -> str:
        return sha256(self._der())

    @property
    def hint(self) -> str:
        return base64.b64encode(hashlib.sha256(self._der()).digest()).decode()


@dataclass(frozen=True)
class Artifact:
    """A manifest and the blobs it needs (digest -> bytes), ready to push."""

    media_type: str
    body: bytes
    blobs: dict[str, bytes] = field(default_factory=dict)
    artifact_type: str = ""

    @property
    def digest(self) -> str:
        return sha256(self.body)

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": len(self.body)}
        if self.artifact_type:
            out["artifactType"] = self.artifact_type
        return out


def signature_tag(digest: str) -> str:
    algorithm, _, hexpart = digest.partition(":")
    return f"{algorithm}-{hexpart}.sig"


def referrers_tag(digest: str) -> str:
    algorithm, _, hexpart = digest.partition(":")
    return f"{algorithm}-{hexpart}"


def simple_signing_payload(repository: str, digest: str, *, kind: str = PAYLOAD_TYPE) -> bytes:
    """cosign's payload for ``repository`` (``registry/name``) at ``digest``."""
    return canonical(
        {
            "critical": {
                "identity": {"docker-reference": repository},
                "image": {"docker-manifest-digest": digest},
                "type": kind,
            },
            "optional": None,
        }
    )


def signature_layer(payload: bytes, signature: bytes) -> dict[str, Any]:
    return {
        "mediaType": SIMPLE_SIGNING,
        "digest": sha256(payload),
        "size": len(payload),
        "annotations": {SIGNATURE_ANNOTATION: base64.b64encode(signature).decode()},
    }


def signature_artifact(layers: list[tuple[bytes, dict[str, Any]]]) -> Artifact:
    """The ``.sig`` manifest of (payload, layer descriptor) pairs."""
    config = canonical(
        {"architecture": "", "os": "", "config": {}, "rootfs": {"type": "layers", "diff_ids": []}}
    )
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": sha256(config),
            "size": len(config),
        },
        "layers": [layer for _payload, layer in layers],
    }
    blobs = {sha256(config): config} | {layer["digest"]: payload for payload, layer in layers}
    return Artifact(OCI_MANIFEST, canonical(manifest), blobs)


def key_bundle(
    signer: Signer,
    digest: str,
    *,
    manifest: bytes | None = None,
    dsse: bool = False,
    subject_digest: str | None = None,
) -> bytes:
    """A Sigstore bundle v0.3 signed with ``signer`` (no transparency-log entry, as
    ``cosign sign --key --tlog-upload=false --new-bundle-format`` writes). A message signature is
    over ``manifest`` (the image manifest's bytes, which hash to ``digest``); a DSSE envelope carries
    an in-toto statement whose subject is ``subject_digest`` (``digest`` by default)."""
    material = {"publicKey": {"hint": signer.hint}, "tlogEntries": []}
    if dsse:
        payload = intoto_statement(subject_digest or digest)
        envelope = {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": IN_TOTO,
            "signatures": [
                {"sig": base64.b64encode(signer.sign(pae(IN_TOTO, payload))).decode(), "keyid": ""}
            ],
        }
        return canonical(
            {"mediaType": BUNDLE_V03, "verificationMaterial": material, "dsseEnvelope": envelope}
        )
    if manifest is None or sha256(manifest) != digest:
        raise ValueError("a message signature needs the image manifest's bytes")
    named = bytes.fromhex((subject_digest or digest).partition(":")[2])
    signed = {
        "messageDigest": {"algorithm": "SHA2_256", "digest": base64.b64encode(named).decode()},
        "signature": base64.b64encode(signer.sign(manifest)).decode(),
    }
    return canonical({"mediaType": BUNDLE_V03, "verificationMaterial": material, "messageSignature": signed})


def intoto_statement(digest: str, name: str = "image") -> bytes:
    algorithm, _, hexpart = digest.partition(":")
    return canonical(
        {
            "_type": STATEMENT_V1,
            "subject": [{"name": name, "digest": {algorithm: hexpart}}],
            "predicateType": COSIGN_SIGN_PREDICATE,
            "predicate": {},
        }
    )


def pae(payload_type: str, payload: bytes) -> bytes:
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def bundle_artifact(subject: dict[str, Any], bundle: bytes, *, media_type: str = BUNDLE_V03) -> Artifact:
    """The OCI 1.1 referrer manifest carrying ``bundle`` for ``subject`` (a descriptor of the image)."""
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": media_type,
        "config": {"mediaType": OCI_EMPTY, "digest": sha256(EMPTY), "size": len(EMPTY)},
        "layers": [{"mediaType": media_type, "digest": sha256(bundle), "size": len(bundle)}],
        "subject": subject,
    }
    return Artifact(
        OCI_MANIFEST, canonical(manifest), {sha256(EMPTY): EMPTY, sha256(bundle): bundle}, media_type
    )


def referrers_index(descriptors: list[dict[str, Any]]) -> bytes:
    return canonical({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": descriptors})


# --- against a registry ---------------------------------------------------------------------------


def push_artifact(http: httpx.Client, base: str, repository: str, artifact: Artifact, reference: str) -> str:
    for data in artifact.blobs.values():
        upload_blob(http, base, repository, data)
    return put_manifest(http, base, repository, reference, artifact.body, media_type=artifact.media_type)


def _get_manifest(http: httpx.Client, base: str, repository: str, reference: str) -> tuple[str, bytes] | None:
    response = http.get(
        f"{base}/v2/{repository}/manifests/{reference}", headers={"Accept": f"{OCI_MANIFEST}, {OCI_INDEX}"}
    )
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.headers["content-type"].split(";", 1)[0].strip(), response.content


def sign_image(
    registry_url: str,
    repository: str,
    digest: str,
    signer: Signer,
    *,
    payload: bytes | None = None,
    registry_host: str | None = None,
) -> str:
    """``cosign sign --key``: sign ``digest`` (its simple-signing payload, or ``payload``) and add
    the signature to the ``.sig`` tag. Returns the signature manifest's digest."""
    base = registry_url.rstrip("/")
    host = registry_host or httpx.URL(base).netloc.decode()
    payload = payload if payload is not None else simple_signing_payload(f"{host}/{repository}", digest)
    with httpx.Client(timeout=30.0) as http:
        layers: list[tuple[bytes, dict[str, Any]]] = []
        existing = _get_manifest(http, base, repository, signature_tag(digest))
        if existing is not None:
            for layer in json.loads(existing[1]).get("layers", []):
                blob = http.get(f"{base}/v2/{repository}/blobs/{layer['digest']}")
                blob.raise_for_status()
                layers.append((blob.content, layer))
        layers.append((payload, signature_layer(payload, signer.sign(payload))))
        return push_artifact(http, base, repository, signature_artifact(layers), signature_tag(digest))


def copy_signatures(registry_url: str, repository: str, source_digest: str, target_digest: str) -> str:
    """Put the ``.sig`` manifest of ``source_digest`` under ``target_digest``'s tag (a replay)."""
    base = registry_url.rstrip("/")
    with httpx.Client(timeout=30.0) as http:
        found = _get_manifest(http, base, repository, signature_tag(source_digest))
        if found is None:
            raise RuntimeError(f"{repository}@{source_digest} has no signatures")
        return put_manifest(
            http, base, repository, signature_tag(target_digest), found[1], media_type=found[0]
        )


def attach_bundle(
    registry_url: str,
    repository: str,
    digest: str,
    bundle: bytes,
    *,
    tag_schema: bool = True,
    media_type: str = BUNDLE_V03,
) -> str:
    """Attach ``bundle`` to ``digest`` as an OCI 1.1 referrer and, with ``tag_schema``, list it in
    the ``sha256-<hex>`` index. Returns the referrer manifest's digest."""
    base = registry_url.rstrip("/")
    with httpx.Client(timeout=30.0) as http:
        found = _get_manifest(http, base, repository, digest)
        if found is None:
            raise RuntimeError(f"{repository}@{digest} does not exist")
        subject = {"mediaType": found[0], "digest": digest, "size": len(found[1])}
        artifact = bundle_artifact(subject, bundle, media_type=media_type)
        pushed = push_artifact(http, base, repository, artifact, artifact.digest)
        if tag_schema:
            tag = referrers_tag(digest)
            index = _get_manifest(http, base, repository, tag)
            entries = json.loads(index[1]).get("manifests", []) if index else []
            entries = [e for e in entries if e.get("digest") != pushed] + [artifact.descriptor()]
            put_manifest(http, base, repository, tag, referrers_index(entries), media_type=OCI_INDEX)
        return pushed


def fetch_manifest(registry_url: str, repository: str, reference: str) -> bytes:
    """The manifest bytes of ``reference`` (for message signatures over it)."""
    base = registry_url.rstrip("/")
    with httpx.Client(timeout=30.0) as http:
        found = _get_manifest(http, base, repository, reference)
    if found is None:
        raise RuntimeError(f"{repository}:{reference} not found")
    return found[1]
