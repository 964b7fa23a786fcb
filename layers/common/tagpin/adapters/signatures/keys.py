"""The policy's public keys, loaded once, and signature checks with them (``cryptography``).

Only the two kinds cosign and Sigstore sign with by default: ECDSA P-256 with SHA-256 (ASN.1 DER
signatures, as cosign writes them) and Ed25519 (PureEd25519 over the message). A key of another kind
or curve is a configuration error (``ValueError`` when loading), not a signature that fails.

A key's id is ``sha256:<hex>`` of its DER SubjectPublicKeyInfo, the RFC 6962 style id Sigstore uses;
bundles name their key by a ``hint``, which cosign writes as the base64 of the same hash.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

type PublicKey = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey


@dataclass(frozen=True)
class TrustedKey:
    key: PublicKey
    key_id: str  # sha256:<hex of the DER SubjectPublicKeyInfo>
    kind: str  # "ecdsa-p256" | "ed25519"

    @property
    def hints(self) -> frozenset[str]:
        """How a bundle may name this key: the id, its hex, or the base64 of the hash (cosign)."""
        hexpart = self.key_id.partition(":")[2]
        return frozenset({self.key_id, hexpart, base64.b64encode(bytes.fromhex(hexpart)).decode()})

    def verify(self, signature: bytes, message: bytes) -> bool:
        """``signature`` over ``message`` (hashed with SHA-256 for ECDSA)."""
        try:
            if isinstance(self.key, ed25519.Ed25519PublicKey):
                self.key.verify(signature, message)
            else:
                self.key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            return False
        return True

    def verify_prehashed(self, signature: bytes, sha256_digest: bytes) -> bool:
        """An ECDSA signature over a message known only by its SHA-256 (e.g. an image manifest by its
        digest). Ed25519 signs the message itself: False, the caller needs the message."""
        if isinstance(self.key, ed25519.Ed25519PublicKey) or len(sha256_digest) != 32:
            return False
        try:
            self.key.verify(signature, sha256_digest, ec.ECDSA(Prehashed(hashes.SHA256())))
        except (InvalidSignature, ValueError):
            return False
        return True


def key_id(key: PublicKey) -> str:
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(der).hexdigest()


@lru_cache(maxsize=64)
def load_key(pem: str) -> TrustedKey:
    """A configured PEM public key; ValueError for anything but ECDSA P-256 or Ed25519."""
    try:
        key = serialization.load_pem_public_key(pem.strip().encode())
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise ValueError(f"not a PEM public key ({type(exc).__name__})") from None
    if isinstance(key, ed25519.Ed25519PublicKey):
        return TrustedKey(key, key_id(key), "ed25519")
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return TrustedKey(key, key_id(key), "ecdsa-p256")
    raise ValueError(f"unsupported public key type {type(key).__name__}: ECDSA P-256 or Ed25519 only")


def load_keys(pems: Iterable[str]) -> tuple[TrustedKey, ...]:
    return tuple(load_key(pem) for pem in pems)


def b64decode(text: object, limit: int) -> bytes | None:
    """Strict base64 of at most ``limit`` decoded bytes; None for anything else."""
    if not isinstance(text, str) or len(text) > (limit * 4) // 3 + 4:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def first_verifying(keys: Iterable[TrustedKey], signature: bytes, message: bytes) -> TrustedKey | None:
    return next((k for k in keys if k.verify(signature, message)), None)
