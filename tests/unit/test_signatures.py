"""RegistrySignatureChecker against an in-memory registry: each verdict, each scheme, the bounds.

Signatures are real (keys made here, ``tagpin_local.cosign``; keyless bundles from
``tagpin_local.sigstore_local``, a Fulcio, CT log and Rekor of the test's own): only the registry
is a fake (``tests.support.artifacts.MemoryRegistry``)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from tagpin.adapters.signatures import RegistrySignatureChecker, SignatureLimits
from tagpin.adapters.signatures.checker import decide
from tagpin.adapters.signatures.keyless import certificate_identity
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import ContentTooLarge, GetsDisabled
from tagpin.ports.signatures import (
    KeylessIdentity,
    SignaturePolicy,
    SignatureProblem,
    SignatureScheme,
    SignatureVerdict,
)
from tagpin_local.cosign import (
    BUNDLE_V03,
    Signer,
    bundle_artifact,
    key_bundle,
    sha256,
    signature_artifact,
    signature_layer,
    signature_tag,
    simple_signing_payload,
)
from tagpin_local.sigstore_local import LocalSigstore

from tests.support.artifacts import MemoryRegistry, transient

P = SignatureProblem
IMAGE = ImageRef("registry.test", "team/app", "v1")
ISSUER = "https://token.actions.example.com"
WHO = "https://github.example.com/team/app/.github/workflows/release.yml@refs/heads/main"
EMAIL = "release@example.com"

EC = Signer.generate("ecdsa-p256")
ED = Signer.generate("ed25519")
STRANGER = Signer.generate("ecdsa-p256")  # signs, but no policy lists it
SIGSTORE = LocalSigstore()
OTHER_SIGSTORE = LocalSigstore()  # another instance: its certificates do not chain to SIGSTORE's root

KEYS = SignaturePolicy(public_keys=(EC.public_pem, ED.public_pem))
KEYLESS = SignaturePolicy(
    identities=(KeylessIdentity(ISSUER, WHO), KeylessIdentity("https://accounts.example.com", EMAIL)),
    trusted_root=SIGSTORE.trusted_root(),
)
BOTH = SignaturePolicy(
    public_keys=KEYS.public_keys, identities=KEYLESS.identities, trusted_root=KEYLESS.trusted_root
)


@dataclass
class Image:
    registry: MemoryRegistry
    digest: str
    manifest: bytes

    @property
    def subject(self) -> dict[str, object]:
        return {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": self.digest,
            "size": len(self.manifest),
        }

    def cosign(self, *layers: tuple[bytes, dict[str, object]]) -> None:
        self.registry.put(signature_artifact(list(layers)), signature_tag(self.digest))

    def bundle(self, bundle: bytes) -> str:
        return self.registry.put(bundle_artifact(self.subject, bundle))


def image() -> Image:
    registry = MemoryRegistry()
    digest, manifest = registry.put_image("v1")
    return Image(registry, digest, manifest)


def signed_layer(
    signer: Signer, digest: str, payload: bytes | None = None
) -> tuple[bytes, dict[str, object]]:
    payload = payload if payload is not None else simple_signing_payload("registry.test/team/app", digest)
    return payload, signature_layer(payload, signer.sign(payload))


def check(img: Image, policy: SignaturePolicy = KEYS, **limits: int) -> SignatureVerdict:
    return RegistrySignatureChecker(img.registry, SignatureLimits(**limits)).check(IMAGE, img.digest, policy)


OTHER_DIGEST = "sha256:" + "0" * 64


# --- each case: how the image is signed (or not), the policy, the verdict ------------------------


def unsigned(img: Image) -> None:
    pass


def cosign_ecdsa(img: Image) -> None:
    img.cosign(signed_layer(EC, img.digest))


def cosign_ed25519(img: Image) -> None:
    img.cosign(signed_layer(ED, img.digest))


def cosign_second_layer(img: Image) -> None:
    img.cosign(signed_layer(STRANGER, img.digest), signed_layer(ED, img.digest))


def cosign_stranger(img: Image) -> None:
    img.cosign(signed_layer(STRANGER, img.digest))


def cosign_tampered_payload(img: Image) -> None:
    payload, layer = signed_layer(EC, img.digest)
    forged = payload.replace(b"registry.test/team/app", b"registry.test/team/evil")
    img.cosign((forged, {**layer, "digest": sha256(forged), "size": len(forged)}))


def cosign_other_digest(img: Image) -> None:
    img.cosign(signed_layer(EC, OTHER_DIGEST))  # a signature of another image, replayed under this tag


def cosign_wrong_type(img: Image) -> None:
    payload = simple_signing_payload("registry.test/team/app", img.digest, kind="atomic container signature")
    img.cosign(signed_layer(EC, img.digest, payload))


def cosign_not_json(img: Image) -> None:
    img.cosign(signed_layer(EC, img.digest, b'{"critical": {"image": '))


def cosign_no_signature(img: Image) -> None:
    payload, layer = signed_layer(EC, img.digest)
    img.cosign((payload, {**layer, "annotations": {"dev.cosignproject.cosign/signature": "not base64!"}}))


def cosign_blob_missing(img: Image) -> None:
    payload, layer = signed_layer(EC, img.digest)
    img.cosign((payload, layer))
    del img.registry.blobs[str(layer["digest"])]


def cosign_blob_corrupt(img: Image) -> None:
    payload, layer = signed_layer(EC, img.digest)
    img.cosign((payload, layer))
    img.registry.blobs[str(layer["digest"])] = payload + b" "  # served, but not what the digest names


def cosign_keyless(img: Image) -> None:
    payload, layer = signed_layer(STRANGER, img.digest)
    annotations = {**layer["annotations"], "dev.sigstore.cosign/certificate": "-----BEGIN CERTIFICATE-----"}  # type: ignore[dict-item]
    img.cosign((payload, {**layer, "annotations": annotations}))


def bundle_message(signer: Signer) -> Callable[[Image], None]:
    def sign(img: Image) -> None:
        img.bundle(key_bundle(signer, img.digest, manifest=img.manifest))

    return sign


def bundle_dsse(signer: Signer) -> Callable[[Image], None]:
    def sign(img: Image) -> None:
        img.bundle(key_bundle(signer, img.digest, dsse=True))

    return sign


def bundle_other_digest(img: Image) -> None:
    img.bundle(key_bundle(EC, img.digest, manifest=img.manifest, subject_digest=OTHER_DIGEST))


def bundle_dsse_other_subject(img: Image) -> None:
    img.bundle(key_bundle(ED, img.digest, dsse=True, subject_digest=OTHER_DIGEST))


def bundle_tampered(img: Image) -> None:
    doc = json.loads(key_bundle(EC, img.digest, dsse=True))
    payload = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
    payload["predicate"] = {"forged": True}
    doc["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    img.bundle(json.dumps(doc).encode())  # names EC (its hint) and EC's signature no longer holds


def bundle_stranger(img: Image) -> None:
    img.bundle(key_bundle(STRANGER, img.digest, manifest=img.manifest))


def bundle_truncated(img: Image) -> None:
    whole = key_bundle(EC, img.digest, manifest=img.manifest)
    img.bundle(whole[: len(whole) // 2])


def keyless(identity: str = WHO, issuer: str = ISSUER, **options: object) -> Callable[[Image], None]:
    def sign(img: Image) -> None:
        img.bundle(SIGSTORE.keyless_bundle(img.digest, identity, issuer, **options))  # type: ignore[arg-type]

    return sign


def keyless_other_root(img: Image) -> None:
    img.bundle(OTHER_SIGSTORE.keyless_bundle(img.digest, WHO, ISSUER))


def keyless_tampered(img: Image) -> None:
    doc = json.loads(SIGSTORE.keyless_bundle(img.digest, WHO, ISSUER))
    signature = bytearray(base64.b64decode(doc["messageSignature"]["signature"]))
    signature[-1] ^= 1
    doc["messageSignature"]["signature"] = base64.b64encode(bytes(signature)).decode()
    img.bundle(json.dumps(doc).encode())


def keyless_truncated(img: Image) -> None:
    whole = SIGSTORE.keyless_bundle(img.digest, WHO, ISSUER)
    img.bundle(whole[:-40])


def keyless_no_log_entry(img: Image) -> None:
    doc = json.loads(SIGSTORE.keyless_bundle(img.digest, WHO, ISSUER))
    doc["verificationMaterial"]["tlogEntries"] = []
    img.bundle(json.dumps(doc).encode())


LONG_AGO = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)

CASES: list[
    tuple[str, Callable[[Image], None], SignaturePolicy, SignatureProblem | None, SignatureScheme | None]
] = [
    ("unsigned", unsigned, KEYS, P.UNSIGNED, None),
    ("cosign ecdsa", cosign_ecdsa, KEYS, None, SignatureScheme.COSIGN_TAG),
    ("cosign ed25519", cosign_ed25519, KEYS, None, SignatureScheme.COSIGN_TAG),
    ("cosign: a trusted second layer", cosign_second_layer, KEYS, None, SignatureScheme.COSIGN_TAG),
    ("cosign: a key not in the list", cosign_stranger, KEYS, P.WRONG_KEY, SignatureScheme.COSIGN_TAG),
    (
        "cosign: payload changed after signing",
        cosign_tampered_payload,
        KEYS,
        P.WRONG_KEY,
        SignatureScheme.COSIGN_TAG,
    ),
    (
        "cosign: payload names another digest",
        cosign_other_digest,
        KEYS,
        P.DIGEST_MISMATCH,
        SignatureScheme.COSIGN_TAG,
    ),
    ("cosign: payload of another type", cosign_wrong_type, KEYS, P.MALFORMED, SignatureScheme.COSIGN_TAG),
    ("cosign: payload not JSON", cosign_not_json, KEYS, P.MALFORMED, SignatureScheme.COSIGN_TAG),
    ("cosign: signature not base64", cosign_no_signature, KEYS, P.MALFORMED, SignatureScheme.COSIGN_TAG),
    ("cosign: payload blob missing", cosign_blob_missing, KEYS, P.MALFORMED, SignatureScheme.COSIGN_TAG),
    ("cosign: payload blob corrupt", cosign_blob_corrupt, KEYS, P.MALFORMED, SignatureScheme.COSIGN_TAG),
    ("cosign keyless: not verified here", cosign_keyless, KEYLESS, P.UNSUPPORTED, SignatureScheme.COSIGN_TAG),
    ("bundle: message, ecdsa", bundle_message(EC), KEYS, None, SignatureScheme.BUNDLE_KEY),
    ("bundle: message, ed25519", bundle_message(ED), KEYS, None, SignatureScheme.BUNDLE_KEY),
    ("bundle: dsse, ecdsa", bundle_dsse(EC), KEYS, None, SignatureScheme.BUNDLE_KEY),
    ("bundle: dsse, ed25519", bundle_dsse(ED), KEYS, None, SignatureScheme.BUNDLE_KEY),
    (
        "bundle: message digest of another image",
        bundle_other_digest,
        KEYS,
        P.DIGEST_MISMATCH,
        SignatureScheme.BUNDLE_KEY,
    ),
    (
        "bundle: statement about another subject",
        bundle_dsse_other_subject,
        KEYS,
        P.DIGEST_MISMATCH,
        SignatureScheme.BUNDLE_KEY,
    ),
    (
        "bundle: names our key, signature broken",
        bundle_tampered,
        KEYS,
        P.BAD_SIGNATURE,
        SignatureScheme.BUNDLE_KEY,
    ),
    ("bundle: a key not in the list", bundle_stranger, KEYS, P.WRONG_KEY, SignatureScheme.BUNDLE_KEY),
    ("bundle: truncated", bundle_truncated, KEYS, P.MALFORMED, SignatureScheme.BUNDLE),
    ("keyless: message", keyless(), KEYLESS, None, SignatureScheme.BUNDLE_KEYLESS),
    ("keyless: dsse", keyless(dsse=True), KEYLESS, None, SignatureScheme.BUNDLE_KEYLESS),
    (
        "keyless: email identity",
        keyless(EMAIL, "https://accounts.example.com"),
        KEYLESS,
        None,
        SignatureScheme.BUNDLE_KEYLESS,
    ),
    (
        "keyless: another identity",
        keyless("mallory@example.com", "https://accounts.example.com"),
        KEYLESS,
        P.WRONG_IDENTITY,
        SignatureScheme.BUNDLE_KEYLESS,
    ),
    (
        "keyless: our identity, another issuer",
        keyless(WHO, "https://evil.example.com"),
        KEYLESS,
        P.WRONG_IDENTITY,
        SignatureScheme.BUNDLE_KEYLESS,
    ),
    (
        "keyless: signed after the certificate expired",
        keyless(valid_from=LONG_AGO),
        KEYLESS,
        P.EXPIRED,
        SignatureScheme.BUNDLE_KEYLESS,
    ),
    (
        "keyless: signed before the certificate was valid",
        keyless(signed_at=LONG_AGO, valid_from=LONG_AGO + dt.timedelta(hours=1)),
        KEYLESS,
        P.EXPIRED,
        SignatureScheme.BUNDLE_KEYLESS,
    ),
    (
        "keyless: another root of trust",
        keyless_other_root,
        KEYLESS,
        P.WRONG_KEY,
        SignatureScheme.BUNDLE_KEYLESS,
    ),
    ("keyless: signature broken", keyless_tampered, KEYLESS, P.BAD_SIGNATURE, SignatureScheme.BUNDLE_KEYLESS),
    (
        "keyless: message digest of another image",
        keyless(subject_digest=OTHER_DIGEST),
        KEYLESS,
        P.DIGEST_MISMATCH,
        SignatureScheme.BUNDLE_KEYLESS,
    ),
    (
        "keyless: statement about another subject",
        keyless(dsse=True, subject_digest=OTHER_DIGEST),
        KEYLESS,
        P.DIGEST_MISMATCH,
        SignatureScheme.BUNDLE_KEYLESS,
    ),
    ("keyless: truncated", keyless_truncated, KEYLESS, P.MALFORMED, SignatureScheme.BUNDLE),
    ("keyless: no log entry", keyless_no_log_entry, KEYLESS, P.MALFORMED, SignatureScheme.BUNDLE_KEYLESS),
    ("keyless, and no identity configured", keyless(), KEYS, P.WRONG_KEY, SignatureScheme.BUNDLE_KEYLESS),
    ("keyed, and no key configured", bundle_message(EC), KEYLESS, P.WRONG_KEY, SignatureScheme.BUNDLE_KEY),
]


@pytest.mark.parametrize(
    ("sign", "policy", "problem", "scheme"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_verdicts(
    sign: Callable[[Image], None],
    policy: SignaturePolicy,
    problem: SignatureProblem | None,
    scheme: SignatureScheme | None,
) -> None:
    img = image()
    sign(img)
    verdict = check(img, policy)
    assert (verdict.reason, verdict.scheme) == (problem, scheme), verdict.detail
    assert verdict.ok is (problem is None)
    assert len(verdict.detail) < 400


def test_the_verdict_names_the_signer() -> None:
    img = image()
    cosign_ed25519(img)
    assert check(img).signer == ED.key_id
    img = image()
    keyless()(img)
    assert check(img, KEYLESS).signer == f"{WHO} ({ISSUER})"


def test_a_signature_for_this_digest_is_found_after_one_for_another() -> None:
    """A replayed signature does not hide a real one: every layer is looked at."""
    img = image()
    img.cosign(signed_layer(EC, OTHER_DIGEST), signed_layer(EC, img.digest))
    assert check(img).ok


def test_a_cosign_signature_decides_without_reading_referrers() -> None:
    img = image()
    cosign_ecdsa(img)
    img.registry.fail["referrers"] = transient()
    assert check(img).ok
    assert "referrers" not in img.registry.reads


def test_the_referrers_are_read_when_the_cosign_signatures_do_not_count() -> None:
    img = image()
    cosign_stranger(img)
    bundle_message(ED)(img)
    verdict = check(img)
    assert verdict.ok and verdict.scheme is SignatureScheme.BUNDLE_KEY


def test_either_kind_counts_under_a_policy_of_both() -> None:
    for sign in (cosign_ecdsa, keyless(), bundle_dsse(ED)):
        img = image()
        sign(img)
        assert check(img, BOTH).ok


def test_a_regex_identity_matches_the_whole_identity_only() -> None:
    policy = SignaturePolicy(
        identities=(
            KeylessIdentity(
                ISSUER, r"https://github\.example\.com/team/[^/]+/\.github/workflows/.*", "regex"
            ),
        ),
        trusted_root=SIGSTORE.trusted_root(),
    )
    img = image()
    keyless()(img)
    assert check(img, policy).ok
    img = image()
    keyless("https://github.example.com/other/app/.github/workflows/x.yml@refs/heads/main")(img)
    assert check(img, policy).reason is P.WRONG_IDENTITY
    prefix_only = SignaturePolicy(
        identities=(KeylessIdentity(ISSUER, r"https://github\.example\.com/team", "regex"),),
        trusted_root=SIGSTORE.trusted_root(),
    )
    img = image()
    keyless()(img)
    assert check(img, prefix_only).reason is P.WRONG_IDENTITY


# --- the registry failing -------------------------------------------------------------------------


def test_a_registry_that_does_not_answer_is_unavailable_not_unsigned() -> None:
    img = image()
    img.registry.fail[f"manifest:{signature_tag(img.digest)}"] = transient()
    verdict = check(img)
    assert verdict.reason is P.UNAVAILABLE and verdict.retryable

    img = image()
    img.registry.fail["referrers"] = transient()
    assert check(img).reason is P.UNAVAILABLE


def test_a_blob_that_cannot_be_read_is_unavailable() -> None:
    img = image()
    payload, layer = signed_layer(EC, img.digest)
    img.cosign((payload, layer))
    img.registry.fail[f"blob:{layer['digest']}"] = transient()
    assert check(img).reason is P.UNAVAILABLE


def test_unavailable_outweighs_signatures_that_do_not_count() -> None:
    """The signature behind the failure may be the one that counts: retry, do not block."""
    img = image()
    cosign_stranger(img)
    bundle_message(EC)(img)
    [referrer] = img.registry.referrers(IMAGE, img.digest)
    img.registry.fail[f"manifest:{referrer.digest}"] = transient()
    assert check(img).reason is P.UNAVAILABLE


def test_a_trusted_signature_wins_over_a_registry_failure() -> None:
    img = image()
    bundle_message(EC)(img)
    img.registry.fail[f"manifest:{signature_tag(img.digest)}"] = transient()
    assert check(img).ok


def test_a_head_only_registry_is_unsupported_not_retried() -> None:
    """Docker Hub counts a manifest GET as a pull: the client refuses it, and waiting will not help."""
    img = image()
    cosign_ecdsa(img)
    disabled = GetsDisabled("manifest GETs are disabled for this registry", host="r")
    img.registry.fail[f"manifest:{signature_tag(img.digest)}"] = disabled
    img.registry.fail["referrers"] = disabled
    verdict = check(img)
    assert verdict.reason is P.UNSUPPORTED and not verdict.retryable


def test_a_manifest_over_the_bound_is_malformed() -> None:
    img = image()
    cosign_ecdsa(img)
    img.registry.fail[f"manifest:{signature_tag(img.digest)}"] = ContentTooLarge(
        "too large", host="r", status=200
    )
    assert check(img).reason is P.MALFORMED


# --- bounds -----------------------------------------------------------------------------------------


def test_a_payload_over_the_bound_is_not_read() -> None:
    img = image()
    payload, layer = signed_layer(EC, img.digest)
    img.cosign((payload, {**layer, "size": 64 * 1024 + 1}))
    assert check(img).reason is P.MALFORMED
    assert f"blob:{layer['digest']}" not in img.registry.reads


def test_a_bundle_over_the_bound_is_refused() -> None:
    img = image()
    bundle = key_bundle(EC, img.digest, manifest=img.manifest)
    padded = bundle[:-1] + b',"padding":"' + b"x" * 70_000 + b'"}'
    img.bundle(padded)
    assert check(img).reason is P.MALFORMED


def test_at_most_max_signatures_layers_are_looked_at() -> None:
    img = image()
    strangers = [signed_layer(STRANGER, img.digest) for _ in range(5)]
    img.cosign(*strangers, signed_layer(EC, img.digest))
    assert check(img, max_signatures=6).ok
    verdict = check(img, max_signatures=5)
    assert verdict.reason is P.WRONG_KEY
    assert sum(r.startswith("blob:") for r in img.registry.reads) == 6 + 5


def test_at_most_max_signatures_referrers_are_looked_at() -> None:
    img = image()
    for _ in range(3):
        bundle_stranger(img)
    bundle_message(EC)(img)
    assert check(img, max_signatures=4).ok
    assert check(img, max_signatures=3).reason is P.WRONG_KEY


def test_referrers_of_other_artifact_types_are_ignored() -> None:
    img = image()
    img.registry.put(
        bundle_artifact(
            img.subject,
            key_bundle(EC, img.digest, manifest=img.manifest),
            media_type="application/vnd.example.sbom",
        )
    )
    assert check(img).reason is P.UNSIGNED


# --- the verdict and the policy -------------------------------------------------------------------


def test_decide_prefers_the_most_telling_failure() -> None:
    def v(problem: SignatureProblem) -> SignatureVerdict:
        return SignatureVerdict(False, problem, str(problem))

    assert decide([]).reason is P.UNSIGNED
    assert decide([v(P.MALFORMED), v(P.WRONG_KEY)]).reason is P.WRONG_KEY
    assert decide([v(P.WRONG_KEY), v(P.DIGEST_MISMATCH), v(P.EXPIRED)]).reason is P.DIGEST_MISMATCH
    assert decide([v(P.DIGEST_MISMATCH), v(P.UNAVAILABLE)]).reason is P.UNAVAILABLE
    assert decide([v(P.UNAVAILABLE), SignatureVerdict(True, None, "ok")]).ok
    assert "1 other signature" in decide([v(P.MALFORMED), v(P.WRONG_KEY)]).detail


def test_a_verdict_is_ok_exactly_without_a_reason() -> None:
    with pytest.raises(ValueError, match="ok exactly"):
        SignatureVerdict(True, P.MALFORMED)
    with pytest.raises(ValueError, match="ok exactly"):
        SignatureVerdict(False)


def test_unusable_policies_are_refused() -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    with pytest.raises(ValueError, match="public keys or keyless"):
        SignaturePolicy()
    with pytest.raises(ValueError, match="trusted root"):
        SignaturePolicy(identities=(KeylessIdentity(ISSUER, WHO),))
    with pytest.raises(ValueError):
        KeylessIdentity(ISSUER, "(unclosed", "regex")
    rsa_pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    p384_pem = (
        ec.generate_private_key(ec.SECP384R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    for pem in (rsa_pem, p384_pem, "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----"):
        with pytest.raises(ValueError):
            RegistrySignatureChecker.validate(SignaturePolicy(public_keys=(pem,)))
    with pytest.raises(ValueError, match="trusted root"):
        RegistrySignatureChecker.validate(
            SignaturePolicy(identities=(KeylessIdentity(ISSUER, WHO),), trusted_root='{"mediaType": "x"}')
        )
    RegistrySignatureChecker.validate(BOTH)


def test_check_refuses_what_is_not_a_digest() -> None:
    with pytest.raises(ValueError, match="not a digest"):
        RegistrySignatureChecker(MemoryRegistry()).check(IMAGE, "latest", KEYS)


def test_the_certificate_identity_is_read_from_both_issuer_extensions() -> None:
    issued = SIGSTORE.issue(
        EMAIL,
        "https://accounts.example.com",
        not_before=LONG_AGO,
        not_after=LONG_AGO + dt.timedelta(minutes=10),
    )
    assert certificate_identity(issued.certificate) == ("https://accounts.example.com", [EMAIL])


def test_bundles_listed_under_every_bundle_media_type_are_checked() -> None:
    for media_type in (BUNDLE_V03, "application/vnd.dev.sigstore.bundle+json;version=0.2"):
        img = image()
        img.registry.put(
            bundle_artifact(
                img.subject, key_bundle(EC, img.digest, manifest=img.manifest), media_type=media_type
            )
        )
        assert check(img).ok, media_type
