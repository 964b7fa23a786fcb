"""Signature verification, as the rollout sees it: is this digest signed by someone we trust?

The consumer asks before it patches a workload (``SignatureChecker.check``) and rolls only on
``SignatureVerdict.ok``. A verdict that is not ok says why (``SignatureProblem``), so the caller can
tell a digest nobody trusted signed (block it, say so) from a registry that did not answer
(``UNAVAILABLE``: retry later, neither roll nor give up). ``tagpin.adapters.signatures`` implements
it over the registry: cosign's signature tags and Sigstore bundles attached as OCI 1.1 referrers.

Trust is the policy's (``SignaturePolicy``): public keys, and for keyless signatures (a short-lived
Fulcio certificate) the identities allowed and the Sigstore trusted root they must chain to. The
policy is configuration; nothing in a registry can add to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from tagpin.domain.config.signatures import Signatures
from tagpin.domain.refs import Digest, ImageRef
from tagpin.domain.signatures import KeylessIdentity

__all__ = [
    "KeylessIdentity",
    "SignatureChecker",
    "SignaturePolicy",
    "SignatureProblem",
    "SignatureScheme",
    "SignatureVerdict",
    "TrustMaterial",
    "TrustMaterialError",
]


class SignatureProblem(StrEnum):
    """Why a digest is not (known to be) signed by a trusted signer."""

    UNSIGNED = "unsigned"  # no signature at all for this digest
    BAD_SIGNATURE = "bad-signature"  # a trusted signer is named, but its signature does not verify
    WRONG_KEY = "wrong-key"  # signed, but by no configured key (nor a certificate of the trusted root)
    WRONG_IDENTITY = "wrong-identity"  # keyless: the certificate's identity or issuer is not allowed
    DIGEST_MISMATCH = "digest-mismatch"  # a trusted signature over a payload naming another digest
    MALFORMED = "malformed"  # truncated or unparseable signature, payload, bundle or manifest
    EXPIRED = "expired"  # keyless: the certificate was not valid at the signing time
    UNSUPPORTED = "unsupported"  # a form of signature this checker cannot verify (the detail says which)
    UNAVAILABLE = "unavailable"  # the registry did not answer (or refused): retry, do not decide


class SignatureScheme(StrEnum):
    """Where and how the signature that decided the verdict was found."""

    COSIGN_TAG = "cosign-tag"  # ``sha256-<hex>.sig``: simple-signing payloads, signature annotations
    BUNDLE = "sigstore-bundle"  # an OCI 1.1 referrer with a Sigstore bundle that could not be read
    BUNDLE_KEY = "sigstore-bundle-key"  # an OCI 1.1 referrer: Sigstore bundle signed with a public key
    BUNDLE_KEYLESS = "sigstore-bundle-keyless"  # an OCI 1.1 referrer: bundle with a Fulcio certificate


@dataclass(frozen=True)
class SignatureVerdict:
    """The answer for one digest. ``reason`` is None exactly when ``ok``. ``detail`` is short, for
    people and logs: it never quotes registry content beyond a few characters. ``scheme`` and
    ``signer`` (a key's id, or a certificate's identity and issuer) name what decided it."""

    ok: bool
    reason: SignatureProblem | None = None
    detail: str = ""
    scheme: SignatureScheme | None = None
    signer: str = ""

    def __post_init__(self) -> None:
        if self.ok != (self.reason is None):
            raise ValueError("a verdict is ok exactly when it has no reason")

    @property
    def retryable(self) -> bool:
        """Worth asking again later: the registry, not the signatures, stood in the way."""
        return self.reason is SignatureProblem.UNAVAILABLE


@dataclass(frozen=True)
class SignaturePolicy:
    """Whom to trust. ``public_keys``: PEM public keys (ECDSA P-256, Ed25519); a signature verified
    by any of them counts. ``identities`` with ``trusted_root`` (the text of a Sigstore
    ``trusted_root.json``: Fulcio CAs, CT logs and Rekor keys): keyless signatures whose certificate
    chains to that root and names one of the identities. Verification is offline (inclusion proof,
    checkpoint and promise checked against the root's keys) unless ``transparency_online``, which
    also asks the transparency log for the entry."""

    public_keys: tuple[str, ...] = ()
    identities: tuple[KeylessIdentity, ...] = ()
    trusted_root: str | None = field(default=None, repr=False)
    transparency_online: bool = False

    def __post_init__(self) -> None:
        if self.identities and not self.trusted_root:
            raise ValueError("keyless identities need a trusted root")
        if not self.public_keys and not self.identities:
            raise ValueError("a signature policy needs public keys or keyless identities")


class TrustMaterialError(Exception):
    """The keys or trusted root a gate names could not be read (a secret missing, a KMS key
    disabled or not a signing key, a key of an unsupported type). ``transient``: the service
    failed, not the configuration; asking again later may succeed."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class TrustMaterial(Protocol):
    """The ``SignaturePolicy`` of a configured gate: its keys and trusted root read from where
    they are kept (inline, the stack's secret store, AWS KMS). Raises ``TrustMaterialError``."""

    def policy(self, settings: Signatures) -> SignaturePolicy: ...


class SignatureChecker(Protocol):
    """Check that ``digest`` in ``image``'s repository (its tag and digest are ignored) carries a
    signature ``policy`` trusts. Never raises for what a registry serves or fails to serve: that is
    a verdict (``MALFORMED``, ``UNAVAILABLE``)."""

    def check(self, image: ImageRef, digest: Digest, policy: SignaturePolicy) -> SignatureVerdict: ...
