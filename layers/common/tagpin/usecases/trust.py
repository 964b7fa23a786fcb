"""The trust gates a digest passes before it is rolled to a target (docs/trust.md):

- **signatures** (``images[].signatures``, else the target's wave's): the digest must carry a
  signature the gate trusts (``tagpin.ports.signatures``). ``require`` blocks a digest without
  one, with the reason (unsigned, bad signature, wrong key or identity, digest mismatch...);
  ``warn`` rolls it and records the reason. A registry that did not answer is a transient block
  (the change is tried again), never a verdict. Only a trusted verdict is kept (per digest and
  gate, for the container's life): a signature attached after the push is seen at the next look.
- **platforms**: the image must provide every platform the target's cluster runs. The cluster's
  platforms are its nodes' (``Workloads.platforms``: ``status.nodeInfo``, where the role may list
  nodes), else (nodes not listed, or none listed) the cluster's configured ``platforms``, else
  unknown (not checked). The image's
  are its index's entries, or a single-platform manifest's config. An index that dropped
  ``linux/arm64`` while arm64 nodes exist is blocked with that reason.

Each answer is kept for the invocation's life (a digest's platforms never change; a cluster's
nodes are read once per container and kept ``NODES_TTL_MS``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tagpin.domain.channels import repository_of
from tagpin.domain.config import Cluster, FollowedImage, RolloutSettings, Signatures, Target, signatures_for
from tagpin.domain.platforms import Platform, config_platform, index_platforms, missing
from tagpin.domain.refs import ImageRef
from tagpin.domain.signatures import SignatureMode
from tagpin.ports.registry import GetsDisabled, ManifestFetcher, RegistryError
from tagpin.ports.signatures import SignatureChecker, TrustMaterial, TrustMaterialError
from tagpin.ports.workloads import WorkloadError, Workloads

logger = logging.getLogger(__name__)

NODES_TTL_MS = 10 * 60 * 1000


@dataclass(frozen=True)
class Blocked:
    """Why a digest may not be rolled to a target (recorded, notified once, shown by plan)."""

    gate: str  # "platform", "signature"
    reason: str
    transient: bool = False  # the answer could not be had (a registry error): try again later
    enforced: bool = True  # False: a gate in warn mode; the digest rolls, the reason is recorded


class PlatformGate:
    def __init__(
        self,
        manifests: ManifestFetcher,
        workloads: Callable[[str], Workloads],
        clusters: Callable[[], Mapping[str, Cluster]],
        clock: Callable[[], int],
    ) -> None:
        self._manifests = manifests
        self._workloads = workloads
        self._clusters = clusters
        self._clock = clock
        self._provided: dict[str, frozenset[Platform] | None] = {}
        self._required: dict[str, tuple[int, frozenset[Platform] | None, str]] = {}

    def check(self, image: str, digest: str, target: Target) -> Blocked | None:
        required, source = self.required(target.cluster)
        if not required:
            return None
        try:
            provided = self.provided(image, digest)
        except GetsDisabled:  # a HEAD-only registry: its manifests are not read, nothing to compare
            return None
        except RegistryError as exc:
            if exc.transient:
                return Blocked("platform", f"the image's platforms could not be read: {exc}", transient=True)
            return Blocked("platform", f"the image's platforms could not be read: {exc}")
        if provided is None:  # nothing to compare (no platform in the image's config)
            return None
        lacking = missing(required, provided)
        if not lacking:
            return None
        return Blocked(
            "platform",
            f"{digest} lacks {', '.join(map(str, lacking))}, which {source} of cluster {target.cluster} "
            f"run{'s' if source == 'the configuration' else ''} (it provides "
            f"{', '.join(map(str, sorted(provided))) or 'none'})",
        )

    def required(self, cluster: str) -> tuple[frozenset[Platform] | None, str]:
        """The platforms the cluster's nodes run, and where that comes from."""
        now = self._clock()
        cached = self._required.get(cluster)
        if cached is not None and now - cached[0] < NODES_TTL_MS:
            return cached[1], cached[2]
        found: frozenset[Platform] | None = None
        source = "the nodes"
        try:
            found = self._workloads(cluster).platforms()
        except WorkloadError as exc:
            logger.info(
                "nodes not listed; the configured platforms decide",
                extra={"cluster": cluster, "error": str(exc)},
            )
        if not found:  # not listed, or no node (yet) says what it runs: the configuration decides
            configured = self._clusters().get(cluster)
            source = "the configuration"
            found = (
                frozenset(configured.platform_set)
                if configured is not None and configured.platforms
                else None
            )
        self._required[cluster] = (now, found, source)
        return found, source

    def provided(self, image: str, digest: str) -> frozenset[Platform] | None:
        if digest in self._provided:
            return self._provided[digest]
        repository = repository_of(image)
        ref = ImageRef(repository.registry, repository.repository, None, digest)
        _media, body = self._manifests.fetch_manifest(ref)
        platforms = index_platforms(body)
        if platforms is None:  # a single-platform manifest: its config says
            platforms = self._config_platform(ref, body)
        self._provided[digest] = platforms
        return platforms

    def _config_platform(self, ref: ImageRef, body: bytes) -> frozenset[Platform] | None:
        fetch_blob = getattr(self._manifests, "fetch_blob", None)
        if fetch_blob is None:
            return None
        import json

        try:
            config = json.loads(body).get("config") or {}
            blob = fetch_blob(ref, str(config.get("digest", "")), 64 * 1024)
        except (ValueError, AttributeError):
            return None
        platform = config_platform(blob)
        return None if platform is None else frozenset({platform})


class SignatureGate:
    def __init__(
        self, checker: Callable[[], SignatureChecker], material: Callable[[], TrustMaterial]
    ) -> None:
        # both built at first use: a stack without a signature gate never loads cryptography
        self._checker = checker
        self._material = material
        self._trusted: set[tuple[str, str]] = set()

    def check(self, image: str, digest: str, gate: Signatures) -> Blocked | None:
        enforced = gate.mode is SignatureMode.REQUIRE
        known = (digest, gate.model_dump_json())
        if known in self._trusted:
            return None
        try:
            policy = self._material().policy(gate)
        except TrustMaterialError as exc:
            return Blocked("signature", str(exc), transient=exc.transient, enforced=enforced)
        repository = repository_of(image)
        verdict = self._checker().check(ImageRef(repository.registry, repository.repository), digest, policy)
        if verdict.ok:
            self._trusted.add(known)
            logger.info(
                "signature trusted",
                extra={"image": image, "digest": digest, "signer": verdict.signer, "scheme": verdict.scheme},
            )
            return None
        return Blocked(
            "signature",
            f"{verdict.reason}: {verdict.detail}" if verdict.detail else str(verdict.reason),
            transient=verdict.retryable,
            enforced=enforced,
        )


class TrustGates:
    """Every gate a (digest, target) passes before a patch, in order; the first that blocks says
    why. A gate in warn mode that fails is returned only when no enforced gate blocks."""

    def __init__(
        self,
        platforms: PlatformGate | None = None,
        signatures: SignatureGate | None = None,
        settings: Callable[[], RolloutSettings] | None = None,
    ) -> None:
        self._platforms = platforms
        self._signatures = signatures
        self._settings = settings

    def check(self, followed: FollowedImage, digest: str, target: Target) -> Blocked | None:
        warned: Blocked | None = None
        if (
            self._platforms is not None
            and (blocked := self._platforms.check(followed.image, digest, target)) is not None
        ):
            return blocked
        gate = self.signatures(followed, target)
        if gate is not None and self._signatures is not None:
            blocked = self._signatures.check(followed.image, digest, gate)
            if blocked is not None and blocked.enforced:
                return blocked
            warned = blocked
        return warned

    def signatures(self, followed: FollowedImage, target: Target) -> Signatures | None:
        """The signature gate of ``target``: its image's, else its wave's (the first it joins)."""
        waves = self._settings().waves if self._settings is not None else []
        wave = next((w for w in waves if w.matches(target.cluster, target.namespace)), None)
        return signatures_for(followed.signatures, wave.signatures if wave is not None else None)
