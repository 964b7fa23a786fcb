"""The platform gate: the image must provide every platform the target's cluster runs (docs/trust.md).

The cluster's platforms are its nodes' (``Workloads.platforms``: ``status.nodeInfo``, where the
role may list nodes), else (nodes not listed, or none listed) the cluster's configured
``platforms``, else unknown (not checked). The image's are its index's entries, or a
single-platform manifest's config. An index that dropped ``linux/arm64`` while arm64 nodes exist
is blocked with that reason; a registry that could not answer is a transient block (asked again).

Each answer is kept for the container's life (a digest's platforms never change; a cluster's
nodes are read once per container and kept ``NODES_TTL_MS``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping

from tagpin.domain.channels import FollowedKey, repository_of
from tagpin.domain.config import Cluster, Target
from tagpin.domain.moves import Move
from tagpin.domain.platforms import Platform, config_platform, index_platforms, missing
from tagpin.domain.refs import Digest, ImageRef
from tagpin.ports.registry import GetsDisabled, ManifestFetcher, RegistryError
from tagpin.ports.workloads import WorkloadError, Workloads
from tagpin.usecases.admission.decision import Decision, GateName, Known, Stage

logger = logging.getLogger(__name__)

NODES_TTL_MS = 10 * 60 * 1000


class PlatformGate:
    name = GateName.PLATFORM
    stage = Stage.TARGET

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

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        required, source = self.required(target.cluster)
        if not required:
            return Decision.go(self.name)
        try:
            provided = self.provided(move.image, move.digest)
        except GetsDisabled:  # a HEAD-only registry: its manifests are not read, nothing to compare
            return Decision.go(self.name)
        except RegistryError as exc:
            reason = f"the image's platforms could not be read: {exc}"
            return Decision.block(self.name, reason, transient=exc.transient)
        if provided is None:  # nothing to compare (no platform in the image's config)
            return Decision.go(self.name)
        lacking = missing(required, provided)
        if not lacking:
            return Decision.go(self.name)
        return Decision.block(
            self.name,
            f"{move.digest} lacks {', '.join(map(str, lacking))}, which {source} of cluster "
            f"{target.cluster} run{'s' if source == 'the configuration' else ''} (it provides "
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

    def provided(self, image: FollowedKey, digest: Digest) -> frozenset[Platform] | None:
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
        try:
            config = json.loads(body).get("config") or {}
            blob = fetch_blob(ref, str(config.get("digest", "")), 64 * 1024)
        except (ValueError, AttributeError, RecursionError):
            return None
        platform = config_platform(blob)
        return None if platform is None else frozenset({platform})
