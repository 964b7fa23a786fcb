"""Sigstore bundles attached to an image as OCI 1.1 referrers (cosign's new bundle format).

A referrer of the image digest with artifactType ``application/vnd.dev.sigstore.bundle.v0.3+json``
(or the older ``application/vnd.dev.sigstore.bundle+json;version=0.1|0.2``) is an OCI manifest whose
layer is the bundle JSON. The bundle signs either

- a message (``messageSignature``): the image manifest, known by its digest (``messageDigest``, which
  must be the image's: another digest is ``DIGEST_MISMATCH``); ECDSA verifies against the digest,
  Ed25519 against the manifest's bytes (read, and checked against the digest); or
- a DSSE envelope (``dsseEnvelope``) with an in-toto statement whose subject must carry the image
  digest (``intoto``).

Its ``verificationMaterial`` says who signed: ``publicKey`` (a key, named by an unauthenticated
``hint``) is verified here with the configured keys; a ``hint`` naming a configured key whose
signature does not verify is ``BAD_SIGNATURE`` (tampered), a signature no configured key verifies
otherwise ``WRONG_KEY``. A certificate (``certificate``, ``x509CertificateChain``) is keyless: verified
by ``keyless`` against the policy's trusted root and identities. Key-based bundles are trusted by
their key: transparency-log entries they may carry are not checked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from tagpin.adapters.signatures.intoto import IN_TOTO, names_digest, pae, statement_subjects
from tagpin.adapters.signatures.keys import TrustedKey, b64decode, first_verifying
from tagpin.adapters.signatures.reading import Reading, ReadProblem, candidate_layers
from tagpin.ports.registry import ContentTooLarge, GetsDisabled, RegistryError
from tagpin.ports.signatures import SignaturePolicy, SignatureProblem, SignatureScheme, SignatureVerdict

BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
BUNDLE_TYPES = frozenset(
    {
        BUNDLE_V03,
        "application/vnd.dev.sigstore.bundle+json;version=0.3",
        "application/vnd.dev.sigstore.bundle+json;version=0.2",
        "application/vnd.dev.sigstore.bundle+json;version=0.1",
    }
)
MAX_SIGNATURE_BYTES = 1024


def check_referrers(reading: Reading, policy: SignaturePolicy) -> Iterator[SignatureVerdict]:
    """One verdict per Sigstore-bundle referrer of the digest (at most ``max_signatures``)."""
    try:
        found = reading.registry.referrers(reading.repository, reading.digest)
    except ContentTooLarge as exc:
        yield _verdict(SignatureProblem.MALFORMED, f"referrers: {str(exc)[:200]}", SignatureScheme.BUNDLE)
        return
    except GetsDisabled as exc:
        yield _verdict(SignatureProblem.UNSUPPORTED, f"referrers: {str(exc)[:200]}", SignatureScheme.BUNDLE)
        return
    except RegistryError as exc:
        yield _verdict(SignatureProblem.UNAVAILABLE, f"referrers: {str(exc)[:200]}", SignatureScheme.BUNDLE)
        return
    bundles = [d for d in found if d.artifact_type in BUNDLE_TYPES][: reading.limits.max_signatures]
    for descriptor in bundles:
        where = f"bundle referrer {descriptor.digest[:19]}"
        if descriptor.size > reading.limits.max_manifest_bytes:
            yield _verdict(SignatureProblem.MALFORMED, f"{where}: manifest too large", SignatureScheme.BUNDLE)
            continue
        try:
            body = reading.manifest(descriptor.digest)
            layers = candidate_layers(body, reading.limits.max_signatures)
            layer = _bundle_layer(layers)
            if layer is None:
                yield _verdict(
                    SignatureProblem.MALFORMED, f"{where}: no bundle layer", SignatureScheme.BUNDLE
                )
                continue
            bundle = reading.blob(layer)
        except ReadProblem as problem:
            yield _verdict(problem.problem, f"{where}: {problem.detail}", SignatureScheme.BUNDLE)
            continue
        yield verify_bundle(bundle, reading, policy, where)


def _bundle_layer(layers: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    if not layers:
        return None
    return next((layer for layer in layers if layer.get("mediaType") in BUNDLE_TYPES), layers[0])


def _verdict(
    problem: SignatureProblem | None, detail: str, scheme: SignatureScheme, signer: str = ""
) -> SignatureVerdict:
    return SignatureVerdict(problem is None, problem, detail, scheme, signer)


def verify_bundle(bundle: bytes, reading: Reading, policy: SignaturePolicy, where: str) -> SignatureVerdict:
    """The verdict of one bundle (its bytes, as read) for ``reading.digest``."""
    try:
        doc = json.loads(bundle)
    except (ValueError, RecursionError):
        doc = None
    material = doc.get("verificationMaterial") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not isinstance(material, dict):
        return _verdict(SignatureProblem.MALFORMED, f"{where}: not a Sigstore bundle", SignatureScheme.BUNDLE)
    if isinstance(material.get("publicKey"), dict):
        return _key_bundle(doc, material["publicKey"], reading, where)
    if "certificate" in material or "x509CertificateChain" in material:
        if not policy.identities or policy.trusted_root is None:
            return _verdict(
                SignatureProblem.WRONG_KEY,
                f"{where}: keyless (a certificate), and no keyless identity is configured",
                SignatureScheme.BUNDLE_KEYLESS,
            )
        from tagpin.adapters.signatures import keyless  # sigstore: only for keyless bundles

        return keyless.verify(bundle, doc, reading, policy, where)
    return _verdict(SignatureProblem.MALFORMED, f"{where}: no verification material", SignatureScheme.BUNDLE)


def _named(keys: tuple[TrustedKey, ...], public_key: dict[str, Any], extra: object = None) -> bool:
    hints = {h for h in (public_key.get("hint"), extra) if isinstance(h, str) and h}
    return any(hints & key.hints for key in keys)


def _key_bundle(
    doc: dict[str, Any], public_key: dict[str, Any], reading: Reading, where: str
) -> SignatureVerdict:
    scheme = SignatureScheme.BUNDLE_KEY
    if not reading.keys:
        return _verdict(
            SignatureProblem.WRONG_KEY, f"{where}: signed with a key, and none is configured", scheme
        )
    if isinstance(doc.get("messageSignature"), dict):
        return _message_signature(doc["messageSignature"], public_key, reading, where)
    if isinstance(doc.get("dsseEnvelope"), dict):
        return _dsse(doc["dsseEnvelope"], public_key, reading, where)
    return _verdict(
        SignatureProblem.MALFORMED, f"{where}: neither a message signature nor a DSSE envelope", scheme
    )


def _message_signature(
    signed: dict[str, Any], public_key: dict[str, Any], reading: Reading, where: str
) -> SignatureVerdict:
    scheme = SignatureScheme.BUNDLE_KEY
    signature = b64decode(signed.get("signature"), MAX_SIGNATURE_BYTES)
    if signature is None:
        return _verdict(SignatureProblem.MALFORMED, f"{where}: no base64 signature", scheme)
    algorithm, _, hexpart = reading.digest.partition(":")
    if algorithm != "sha256":
        return _verdict(SignatureProblem.UNSUPPORTED, f"{where}: only sha256 image digests", scheme)
    image = bytes.fromhex(hexpart)
    claimed = signed.get("messageDigest")
    if claimed is not None:
        named = b64decode(claimed.get("digest"), 64) if isinstance(claimed, dict) else None
        if named is None or (claimed.get("algorithm") not in ("SHA2_256", None)):
            return _verdict(SignatureProblem.MALFORMED, f"{where}: malformed message digest", scheme)
        if named != image:
            return _verdict(
                SignatureProblem.DIGEST_MISMATCH,
                f"{where}: the bundle signs another digest (sha256:{named.hex()[:16]}...)",
                scheme,
            )
    key = next((k for k in reading.keys if k.verify_prehashed(signature, image)), None)
    if key is None and any(k.kind == "ed25519" for k in reading.keys):
        try:  # Ed25519 signs the message itself: the manifest's bytes, which hash to the digest
            manifest = reading.manifest(reading.digest)
        except ReadProblem as problem:
            return _verdict(problem.problem, f"{where}: {problem.detail}", scheme)
        if hashlib.sha256(manifest).digest() == image:
            key = first_verifying((k for k in reading.keys if k.kind == "ed25519"), signature, manifest)
    return _signed(key, public_key, None, reading, where)


def _signed(
    key: TrustedKey | None, public_key: dict[str, Any], keyid: object, reading: Reading, where: str
) -> SignatureVerdict:
    scheme = SignatureScheme.BUNDLE_KEY
    if key is not None:
        return _verdict(None, f"{where}: signed by {key.key_id}", scheme, key.key_id)
    if _named(reading.keys, public_key, keyid):
        return _verdict(
            SignatureProblem.BAD_SIGNATURE,
            f"{where}: names a configured key, and its signature does not verify",
            scheme,
        )
    return _verdict(SignatureProblem.WRONG_KEY, f"{where}: no configured key verifies the signature", scheme)


def _dsse(
    envelope: dict[str, Any], public_key: dict[str, Any], reading: Reading, where: str
) -> SignatureVerdict:
    scheme = SignatureScheme.BUNDLE_KEY
    payload = b64decode(envelope.get("payload"), reading.limits.max_payload_bytes)
    payload_type = envelope.get("payloadType")
    signatures = envelope.get("signatures")
    if payload is None or not isinstance(payload_type, str) or not isinstance(signatures, list):
        return _verdict(SignatureProblem.MALFORMED, f"{where}: malformed DSSE envelope", scheme)
    message = pae(payload_type, payload)
    key, keyid = None, None
    for entry in signatures[: reading.limits.max_signatures]:
        signature = b64decode(entry.get("sig"), MAX_SIGNATURE_BYTES) if isinstance(entry, dict) else None
        if signature is None:
            return _verdict(SignatureProblem.MALFORMED, f"{where}: malformed DSSE signature", scheme)
        keyid = keyid or entry.get("keyid")
        key = first_verifying(reading.keys, signature, message)
        if key is not None:
            break
    if key is None:
        return _signed(None, public_key, keyid, reading, where)
    return statement_verdict(payload_type, payload, reading.digest, where, scheme, key.key_id)


def statement_verdict(
    payload_type: str, payload: bytes, digest: str, where: str, scheme: SignatureScheme, signer: str
) -> SignatureVerdict:
    """The verdict of a verified DSSE payload: an in-toto statement whose subject is ``digest``."""
    subjects = statement_subjects(payload) if payload_type == IN_TOTO else None
    if subjects is None:
        return _verdict(
            SignatureProblem.MALFORMED,
            f"{where}: the signed payload is not an in-toto statement",
            scheme,
            signer,
        )
    if not names_digest(subjects, digest):
        return _verdict(
            SignatureProblem.DIGEST_MISMATCH,
            f"{where}: signed by {signer}, for another subject",
            scheme,
            signer,
        )
    return _verdict(None, f"{where}: signed by {signer}", scheme, signer)
