"""``SignatureChecker`` over a registry: every signature of a digest, in every scheme, until one counts.

Order: cosign's ``.sig`` tag first (one manifest read when the image is signed that way), then the
Sigstore-bundle referrers; the first signature the policy trusts decides (``ok``). When none does,
the verdict says the most telling reason found:

1. ``UNAVAILABLE``: something could not be read for the registry's sake; the signature that would
   count may be behind it, so the caller retries rather than blocks;
2. ``DIGEST_MISMATCH``, ``BAD_SIGNATURE``, ``EXPIRED``, ``WRONG_IDENTITY``: a trusted signer's
   material that does not hold for this digest (replayed, tampered, out of date, someone else);
3. ``WRONG_KEY``, ``UNSUPPORTED``, ``MALFORMED``: signatures nobody trusted, or could read;
4. ``UNSIGNED``: nothing at all.

The policy's keys and trusted root are configuration: one that cannot be used raises ``ValueError``
(``validate`` checks a policy up front); nothing a registry serves raises.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tagpin.adapters.signatures import bundles, cosign
from tagpin.adapters.signatures.keys import load_keys
from tagpin.adapters.signatures.reading import Reading, SignatureLimits
from tagpin.domain.refs import ImageRef, is_digest
from tagpin.ports.registry import ArtifactReader
from tagpin.ports.signatures import SignaturePolicy, SignatureProblem, SignatureVerdict

log = logging.getLogger(__name__)

PRECEDENCE = (
    SignatureProblem.UNAVAILABLE,
    SignatureProblem.DIGEST_MISMATCH,
    SignatureProblem.BAD_SIGNATURE,
    SignatureProblem.EXPIRED,
    SignatureProblem.WRONG_IDENTITY,
    SignatureProblem.WRONG_KEY,
    SignatureProblem.UNSUPPORTED,
    SignatureProblem.MALFORMED,
)


class RegistrySignatureChecker:
    def __init__(self, registry: ArtifactReader, limits: SignatureLimits | None = None) -> None:
        self._registry = registry
        self._limits = limits or SignatureLimits()

    @staticmethod
    def validate(policy: SignaturePolicy) -> None:
        """Raise ValueError for a policy whose keys or trusted root cannot be used."""
        load_keys(policy.public_keys)
        if policy.trusted_root is not None:
            from tagpin.adapters.signatures.keyless import trusted_root

            trusted_root(policy.trusted_root)

    def check(self, image: ImageRef, digest: str, policy: SignaturePolicy) -> SignatureVerdict:
        if not is_digest(digest):
            raise ValueError(f"not a digest: {digest[:80]!r}")
        reading = Reading(
            self._registry,
            ImageRef(image.registry, image.repository),
            digest,
            load_keys(policy.public_keys),
            self._limits,
        )
        verdict = decide(self._verdicts(reading, policy))
        log.info(
            "signature of %s@%s: %s%s",
            reading.repository,
            digest,
            "ok" if verdict.ok else verdict.reason,
            f" ({verdict.detail})" if verdict.detail else "",
        )
        return verdict

    @staticmethod
    def _verdicts(reading: Reading, policy: SignaturePolicy) -> Iterable[SignatureVerdict]:
        yield from cosign.check_tag(reading)
        yield from bundles.check_referrers(reading, policy)


def decide(verdicts: Iterable[SignatureVerdict]) -> SignatureVerdict:
    """The first ok verdict (the rest are not read: no more requests), else the most telling."""
    failures: list[SignatureVerdict] = []
    for verdict in verdicts:
        if verdict.ok:
            return verdict
        failures.append(verdict)
    if not failures:
        return SignatureVerdict(False, SignatureProblem.UNSIGNED, "no signature found")
    best = min(
        failures, key=lambda v: PRECEDENCE.index(v.reason) if v.reason in PRECEDENCE else len(PRECEDENCE)
    )
    others = len(failures) - 1
    suffix = f" (and {others} other signature{'s' if others > 1 else ''} not trusted)" if others else ""
    return SignatureVerdict(False, best.reason, best.detail + suffix, best.scheme, best.signer)
