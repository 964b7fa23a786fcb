"""``TrustMaterial``: a configured signature gate's keys and trusted root, read from where they
are kept, as a ``SignaturePolicy``.

- ``pem``: the configuration's text;
- ``secret``: the stack's secret store (``tagpin/signing/...``: an SSM parameter or a Secrets
  Manager secret, cached by ``Secrets``);
- ``kms``: ``kms:GetPublicKey`` of an asymmetric ``SIGN_VERIFY`` key (DER SubjectPublicKeyInfo,
  turned into PEM), cached ``max_age`` seconds per container: a public key, so no secret is held,
  and a KMS call ($0.03 per 10,000) is not made per change. Asked in the key ARN's region (a
  signing key may live in another region than the function); a key id or an alias name, in the
  function's. An alias ARN is refused with what to give instead: the role may call GetPublicKey
  on the key ARNs the stack names (``SigningKmsKeyArns``).

Each key is checked to be one the checker can use (ECDSA P-256, Ed25519), so a wrong key is a
configuration error naming its source, not a signature failure at every digest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import serialization

from tagpin.adapters.secrets import SecretNotFound
from tagpin.adapters.signatures.checker import RegistrySignatureChecker
from tagpin.domain.config.signatures import PublicKeySource, Signatures, kms_key_region
from tagpin.ports.signatures import SignaturePolicy, TrustMaterialError

# A KMS error that says the configuration is wrong (asking again will not help).
_KMS_FINAL = frozenset(
    {
        "NotFoundException",
        "DisabledException",
        "KMSInvalidStateException",
        "InvalidKeyUsageException",
        "UnsupportedOperationException",
        "AccessDeniedException",
        "InvalidArnException",
    }
)


def _key_region(key: str) -> str | None:
    """``kms_key_region``, its refusal a ``TrustMaterialError`` (a configuration written before
    validation refused it, or not validated)."""
    try:
        return kms_key_region(key)
    except ValueError as exc:
        raise TrustMaterialError(str(exc)) from None


class StoredTrustMaterial:
    def __init__(
        self,
        secret_text: Callable[[str], str],
        kms: Callable[[str | None], Any],  # a KMS client in a region (None: the function's)
        *,
        max_age: int = 300,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._secret_text = secret_text
        self._kms = kms
        self._max_age = max_age
        self._clock = clock
        self._kms_keys: dict[str, tuple[float, str]] = {}

    def policy(self, settings: Signatures) -> SignaturePolicy:
        keys = tuple(self._pem(source) for source in settings.keys)
        root: str | None = None
        if settings.trusted_root is not None:
            root = settings.trusted_root.json_text
            if settings.trusted_root.secret is not None:
                root = self._secret(settings.trusted_root.secret, "trusted root")
        try:
            policy = SignaturePolicy(
                public_keys=keys,
                identities=tuple(settings.identities),
                trusted_root=root,
                transparency_online=settings.transparency_online,
            )
            RegistrySignatureChecker.validate(policy)
        except ValueError as exc:
            raise TrustMaterialError(f"the signature gate's trust cannot be used: {exc}") from None
        return policy

    def _pem(self, source: PublicKeySource) -> str:
        if source.secret is not None:
            pem = self._secret(source.secret, "public key")
        elif source.kms is not None:
            pem = self._kms_pem(source.kms)
        else:
            assert source.pem is not None
            pem = source.pem
        try:
            RegistrySignatureChecker.validate(SignaturePolicy(public_keys=(pem,)))
        except ValueError as exc:
            raise TrustMaterialError(f"{source.name}: {exc}") from None
        return pem

    def _secret(self, name: str, what: str) -> str:
        try:
            return self._secret_text(name)
        except SecretNotFound as exc:
            raise TrustMaterialError(f"{what}: {exc}") from None
        except Exception as exc:  # the store failed (throttled, unreachable): worth asking again
            raise TrustMaterialError(
                f"{what}: secret {name} could not be read: {exc}", transient=True
            ) from None

    def _kms_pem(self, key: str) -> str:
        now = self._clock()
        cached = self._kms_keys.get(key)
        if cached is not None and now - cached[0] < self._max_age:
            return cached[1]
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._kms(_key_region(key)).get_public_key(KeyId=key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            raise TrustMaterialError(
                f"kms {key}: GetPublicKey failed ({code})", transient=code not in _KMS_FINAL
            ) from None
        except BotoCoreError as exc:
            raise TrustMaterialError(f"kms {key}: GetPublicKey failed ({exc})", transient=True) from None
        if answer.get("KeyUsage") != "SIGN_VERIFY":
            raise TrustMaterialError(f"kms {key}: not a signing key (KeyUsage {answer.get('KeyUsage')})")
        try:
            public = serialization.load_der_public_key(answer["PublicKey"])
        except (ValueError, KeyError) as exc:
            raise TrustMaterialError(f"kms {key}: its public key could not be read ({exc})") from None
        pem = public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()
        self._kms_keys[key] = (now, pem)
        return pem
