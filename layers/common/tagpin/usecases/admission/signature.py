"""The signature gate (``images[].signatures``, else the target's wave's; docs/trust.md): the digest
must carry a signature the gate trusts (``tagpin.ports.signatures``).

``require`` blocks a digest without one, with the reason (unsigned, bad signature, wrong key or
identity, digest mismatch...); ``warn`` lets it go and the reason is recorded (a warning). A
registry that did not answer is a transient block (the change is tried again), never a verdict.
Only a trusted verdict is kept (per digest and gate, for the container's life): a signature
attached after the push is seen at the next look.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tagpin.domain.channels import FollowedKey, repository_of
from tagpin.domain.config import FollowedImage, RolloutSettings, Signatures, Target, signatures_for
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest, ImageRef
from tagpin.domain.signatures import SignatureMode
from tagpin.ports.signatures import SignatureChecker, TrustMaterial, TrustMaterialError
from tagpin.usecases.admission.decision import Decision, GateName, Known, Stage

logger = logging.getLogger(__name__)


def signatures_of(
    followed: FollowedImage, target: Target, settings: RolloutSettings | None
) -> Signatures | None:
    """The signature gate of ``target``: its image's, else its wave's (the first it joins)."""
    waves = settings.waves if settings is not None else []
    wave = next((w for w in waves if w.matches(target.cluster, target.namespace)), None)
    return signatures_for(followed.signatures, wave.signatures if wave is not None else None)


class SignatureGate:
    name = GateName.SIGNATURE
    stage = Stage.TARGET

    def __init__(
        self,
        checker: Callable[[], SignatureChecker],
        material: Callable[[], TrustMaterial],
        settings: Callable[[], RolloutSettings] | None = None,
    ) -> None:
        # both built at first use: a stack without a signature gate never loads cryptography
        self._checker = checker
        self._material = material
        self._settings = settings
        self._trusted: set[tuple[str, str]] = set()

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        if known.followed is None:
            return Decision.unknown(self.name, "the image's configuration is not known here")
        settings = self._settings() if self._settings is not None else None
        gate = signatures_of(known.followed, target, settings)
        if gate is None:
            return Decision.go(self.name)
        return self.check(move.image, move.digest, gate)

    def check(self, image: FollowedKey, digest: Digest, gate: Signatures) -> Decision:
        """The digest against one signature gate's configuration."""
        enforced = gate.mode is SignatureMode.REQUIRE
        known = (digest, gate.model_dump_json())
        if known in self._trusted:
            return Decision.go(self.name)
        try:
            policy = self._material().policy(gate)
        except TrustMaterialError as exc:
            return self._refused(str(exc), exc.transient, enforced)
        repository = repository_of(image)
        verdict = self._checker().check(ImageRef(repository.registry, repository.repository), digest, policy)
        if verdict.ok:
            self._trusted.add(known)
            logger.info(
                "signature trusted",
                extra={"image": image, "digest": digest, "signer": verdict.signer, "scheme": verdict.scheme},
            )
            return Decision.go(self.name)
        reason = f"{verdict.reason}: {verdict.detail}" if verdict.detail else str(verdict.reason)
        return self._refused(reason, verdict.retryable, enforced)

    def _refused(self, reason: str, transient: bool, enforced: bool) -> Decision:
        if enforced:
            return Decision.block(self.name, reason, transient=transient)
        return Decision.warning(self.name, reason, transient=transient)
