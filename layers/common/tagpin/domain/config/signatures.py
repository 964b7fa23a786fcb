"""``signatures``: the signature gate of an image (``images[].signatures``) or of a wave
(``rollout.waves[].signatures``); docs/trust.md.

Whom to trust is configuration only: public keys (inline PEM, a secret ``tagpin/signing/...`` of
the stack's secret store, or an AWS KMS asymmetric key whose public half is read with
``kms:GetPublicKey``), and keyless identities with the Sigstore trusted root their certificates
must chain to. Nothing a registry serves can add to it.

Which gate applies to a target (``signatures_for``): the image's when it has one, else the first
wave's the target belongs to, else none. The image is the more specific of the two: a wave cannot
loosen what an image requires.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BeforeValidator, Field, ValidationInfo, model_validator

from tagpin.domain.config.base import SigningSecretName
from tagpin.domain.model import Strict
from tagpin.domain.signatures import KeylessIdentity, SignatureMode

PEM_MAX = 16 * 1024


# The validation context key under which checks of values the functions refuse one at a time (at a
# rollout, for that image's gate) refuse the whole document: set by ``parse_config(..., storing=True)``
# (``tagpin config validate`` and ``push``), never by the functions' own load, so a stored document
# written before a check existed keeps working for every image the check does not concern.
STORING = "storing"


def kms_key_region(key: str) -> str | None:
    """The region of a KMS key ARN or alias ARN (``arn:<partition>:kms:<region>:<account>:key/<id>``
    or ``alias/<name>``: a signing key may live in another region than the function); None for a key
    id or an alias name (the function's region). ``ValueError`` for anything else that starts
    ``arn:``. An alias is authorised as the key it names (IAM policies name keys by key ARN only:
    ``SigningKmsKeyArns`` lists the key's ARN whichever name the configuration gives)."""
    if not key.startswith("arn:"):
        return None
    parts = key.split(":", 5)
    if len(parts) != 6 or parts[2] != "kms" or not parts[3] or not parts[5].startswith(("key/", "alias/")):
        raise ValueError(
            f"kms {key}: not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>) nor an alias ARN "
            "(arn:aws:kms:<region>:<account>:alias/<name>)"
        )
    return parts[3]


TRUSTED_ROOT_MAX = 256 * 1024  # Sigstore's public-good trusted_root.json is about 7 KB


class PublicKeySource(Strict):
    """One public key, from exactly one of ``pem``, ``secret``, ``kms``."""

    pem: str | None = Field(
        default=None,
        max_length=PEM_MAX,
        description="The key itself: PEM `-----BEGIN PUBLIC KEY-----` (ECDSA P-256 or Ed25519), "
        "e.g. cosign's `cosign.pub`.",
    )
    secret: SigningSecretName | None = Field(
        default=None,
        description="A secret named `tagpin/signing/...` (the SSM parameter `/tagpin/signing/...`, "
        "or the Secrets Manager secret) whose text is the PEM key.",
    )
    kms: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9:/_.\-]{1,2048}$",
        description="An AWS KMS asymmetric signing key (key ARN, alias ARN, key id or alias name; an "
        "ARN is read in its region, the others in the stack's; list the key's ARN in "
        "`SigningKmsKeyArns`), e.g. the one `cosign sign --key awskms:///<arn>` used; its public key "
        "is read with `kms:GetPublicKey` (the private key never leaves KMS).",
    )

    @model_validator(mode="after")
    def _one(self, info: ValidationInfo) -> Self:
        given = [n for n in ("pem", "secret", "kms") if getattr(self, n)]
        if len(given) != 1:
            raise ValueError("give exactly one of pem, secret, kms")
        if self.pem is not None and "-----BEGIN PUBLIC KEY-----" not in self.pem:
            raise ValueError("pem: not a PEM public key (-----BEGIN PUBLIC KEY-----)")
        if self.kms is not None and info.context and info.context.get(STORING):
            kms_key_region(self.kms)
        return self

    @property
    def name(self) -> str:
        """How it is named in messages (never the key's text)."""
        if self.secret:
            return f"secret {self.secret}"
        if self.kms:
            return f"kms {self.kms}"
        return "inline key"


class TrustedRootSource(Strict):
    """A Sigstore ``trusted_root.json`` (Fulcio CAs, CT logs, Rekor keys), from exactly one of
    ``json``, ``secret``."""

    json_text: str | None = Field(
        default=None,
        alias="json",
        max_length=TRUSTED_ROOT_MAX,
        description="The trusted root's JSON text (e.g. `sigstore`'s public-good root, or your own "
        "Sigstore deployment's).",
    )
    secret: SigningSecretName | None = Field(
        default=None, description="A secret named `tagpin/signing/...` whose text is the trusted root."
    )

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.json_text is None) == (self.secret is None):
            raise ValueError("give exactly one of json, secret")
        return self


def _compact(value: Any) -> Any:
    """``signatures: warn`` for ``{mode: warn}`` (``off`` needs nothing else; YAML reads an
    unquoted ``off`` as false)."""
    if value is False:
        return {"mode": SignatureMode.OFF}
    return {"mode": value} if isinstance(value, str) else value


class Signatures(Strict):
    """A signature gate: a digest must be signed by one of ``keys``, or keyless by one of
    ``identities`` under ``trusted_root``, before it is rolled (``require``); or rolled anyway
    and the failure recorded (``warn``)."""

    mode: SignatureMode = Field(
        default=SignatureMode.REQUIRE,
        description="`require`: a digest without a trusted signature is not rolled (blocked, with "
        "the reason); `warn`: rolled, the failure recorded and logged; `off`: not checked.",
    )
    keys: list[PublicKeySource] = Field(
        default_factory=list,
        max_length=32,
        description="Public keys: a signature verified by any of them counts (cosign's `.sig` tag "
        "or a Sigstore bundle attached as an OCI 1.1 referrer).",
    )
    identities: list[KeylessIdentity] = Field(
        default_factory=list,
        max_length=32,
        description="Keyless signers: a Sigstore bundle whose Fulcio certificate chains to "
        "`trusted_root` and names one of these (`issuer`, exact; `identity`, the certificate's "
        "subject alternative name, exact or with `match: regex` a whole-match regular expression).",
    )
    trusted_root: TrustedRootSource | None = Field(
        default=None, description="The Sigstore trusted root keyless signatures are verified against."
    )
    transparency_online: bool = Field(
        default=False,
        description="Also ask the transparency log (Rekor) for a keyless signature's entry at "
        "rollout time; by default the bundle's inclusion proof is verified offline.",
    )

    @model_validator(mode="after")
    def _trust(self) -> Self:
        if self.mode is SignatureMode.OFF:
            return self
        if not self.keys and not self.identities:
            raise ValueError(f"mode {self.mode}: give keys or identities (whom to trust)")
        if self.identities and self.trusted_root is None:
            raise ValueError("identities: keyless signers need a trusted_root")
        return self


SignaturesField = Annotated[Signatures | None, BeforeValidator(_compact)]


def signatures_for(image: Signatures | None, wave: Signatures | None) -> Signatures | None:
    """The gate of a target: its image's, else its wave's; None when neither checks signatures."""
    chosen = image if image is not None else wave
    return None if chosen is None or chosen.mode is SignatureMode.OFF else chosen
