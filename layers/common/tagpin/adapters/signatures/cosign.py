"""cosign's signature tag scheme (what ``cosign sign --key`` writes without the new bundle format).

The tag ``sha256-<hex>.sig`` of the image's repository holds an OCI image manifest; each of its
layers is a simple-signing payload (``application/vnd.dev.cosign.simplesigning.v1+json``)::

    {"critical": {"identity": {"docker-reference": "registry/repo"},
                  "image": {"docker-manifest-digest": "sha256:<hex>"},
                  "type": "cosign container image signature"},
     "optional": {...}}

annotated ``dev.cosignproject.cosign/signature``: the base64 signature over the payload's bytes.
Signing more than once appends layers. A signature counts when a configured key verifies it over
the payload (the bytes as read, checked against the layer's digest), and the payload it signs
names this digest: a payload naming another digest is a signature of another image (copied or
replayed under this tag), whoever signed it.

The tag names its signer nowhere, so a signature no configured key verifies is ``WRONG_KEY``
(tampered or someone else's: the two cannot be told apart). Keyless signatures in this scheme
(a certificate annotation, a Rekor bundle annotation) are not verified here: ``UNSUPPORTED``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tagpin.adapters.signatures.keys import b64decode, first_verifying
from tagpin.adapters.signatures.reading import Reading, ReadProblem, candidate_layers
from tagpin.ports.registry import ManifestNotFound
from tagpin.ports.signatures import SignatureProblem, SignatureScheme, SignatureVerdict

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
CERTIFICATE_ANNOTATION = "dev.sigstore.cosign/certificate"
PAYLOAD_TYPE = "cosign container image signature"
MAX_SIGNATURE_BYTES = 1024  # a DER ECDSA P-256 signature is at most 72, Ed25519 64

SCHEME = SignatureScheme.COSIGN_TAG


def signature_tag(digest: str) -> str:
    """``sha256:<hex>`` -> ``sha256-<hex>.sig``."""
    algorithm, _, hexpart = digest.partition(":")
    return f"{algorithm}-{hexpart}.sig"


def _verdict(problem: SignatureProblem | None, detail: str, signer: str = "") -> SignatureVerdict:
    return SignatureVerdict(problem is None, problem, detail, SCHEME, signer)


def check_tag(reading: Reading) -> Iterator[SignatureVerdict]:
    """One verdict per signature layer of the digest's ``.sig`` tag (none when there is no tag)."""
    tag = signature_tag(reading.digest)
    try:
        body = reading.manifest(tag)
    except ManifestNotFound:
        return
    except ReadProblem as problem:
        yield _verdict(problem.problem, f"{tag}: {problem.detail}")
        return
    layers = candidate_layers(body, reading.limits.max_signatures)
    if layers is None:
        yield _verdict(SignatureProblem.MALFORMED, f"{tag} is not an image manifest")
        return
    for index, layer in enumerate(layers):
        yield _check_layer(reading, tag, index, layer)


def _check_layer(reading: Reading, tag: str, index: int, layer: dict[str, Any]) -> SignatureVerdict:
    where = f"{tag} layer {index}"
    annotations = layer.get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    if layer.get("mediaType") != SIMPLE_SIGNING:
        return _verdict(SignatureProblem.MALFORMED, f"{where} is not a simple-signing payload")
    signature = b64decode(annotations.get(SIGNATURE_ANNOTATION), MAX_SIGNATURE_BYTES)
    if signature is None:
        return _verdict(SignatureProblem.MALFORMED, f"{where}: no base64 signature annotation")
    if not reading.keys:
        if CERTIFICATE_ANNOTATION in annotations:
            return _verdict(
                SignatureProblem.UNSUPPORTED,
                f"{where} is keyless (a certificate annotation): keyless signatures are verified "
                "in Sigstore bundles only",
            )
        return _verdict(SignatureProblem.WRONG_KEY, f"{where}: no public key is configured")
    try:
        payload = reading.blob(layer)
    except ReadProblem as problem:
        return _verdict(problem.problem, f"{where}: {problem.detail}")
    key = first_verifying(reading.keys, signature, payload)
    if key is None:
        return _verdict(SignatureProblem.WRONG_KEY, f"{where}: no configured key verifies the signature")
    return _payload_verdict(payload, reading.digest, where, key.key_id)


def _payload_verdict(payload: bytes, digest: str, where: str, signer: str) -> SignatureVerdict:
    try:
        doc = json.loads(payload)
    except (ValueError, RecursionError):
        doc = None
    critical = doc.get("critical") if isinstance(doc, dict) else None
    image = critical.get("image") if isinstance(critical, dict) else None
    named = image.get("docker-manifest-digest") if isinstance(image, dict) else None
    if not isinstance(critical, dict) or not isinstance(named, str):
        return _verdict(
            SignatureProblem.MALFORMED, f"{where}: the signed payload is not simple signing", signer
        )
    if critical.get("type") != PAYLOAD_TYPE:
        return _verdict(
            SignatureProblem.MALFORMED, f"{where}: the signed payload is not of type {PAYLOAD_TYPE!r}", signer
        )
    if named != digest:
        return _verdict(
            SignatureProblem.DIGEST_MISMATCH,
            f"{where}: signed by {signer} for another digest ({named[:80]})",
            signer,
        )
    return _verdict(None, f"{where}: signed by {signer}", signer)
