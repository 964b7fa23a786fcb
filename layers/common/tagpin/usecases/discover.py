"""Discovery: which followed tag (or version channel) each container of a labelled workload
follows, and what was left out and why. The reconciler's first step (``tagpin.usecases.reconcile``);
pure: a workload in, (followed key, target) pairs and notes out."""

from __future__ import annotations

from tagpin.domain.annotations import ANNOTATION_CONTAINERS, ANNOTATION_POLICY
from tagpin.domain.channels import ChannelKey, FollowedKey
from tagpin.domain.config import Target
from tagpin.domain.refs import ImageRef
from tagpin.domain.versions import VersionPolicy
from tagpin.ports.workloads import Workload

NOTE_MAX = 600  # characters of a problem a note quotes: annotations are the cluster's text, up to 256 KB


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def discovered_targets(
    cluster: str, workload: Workload
) -> tuple[list[tuple[FollowedKey, Target]], list[str]]:
    """The (followed tag, target) pairs of a labelled workload, and notes on what was left out."""
    where = f"{cluster}/{workload.namespace}/{workload.kind.value}/{workload.name}"
    if workload.paused:
        return [], [f"{where}: paused"]
    wanted: set[str] | None = None
    if (choice := workload.annotations.get(ANNOTATION_CONTAINERS)) is not None:
        wanted = {c.strip() for c in choice.split(",") if c.strip()}
    found: list[tuple[FollowedKey, Target]] = []
    notes: list[str] = []
    images = {**workload.init_containers, **workload.containers}
    for name in sorted(wanted - images.keys()) if wanted is not None else []:
        notes.append(f"{where}: {ANNOTATION_CONTAINERS} names {_short(name)!r}, which it does not have")
    for name, image in images.items():
        if wanted is not None and name not in wanted:
            continue
        policy = workload.annotations.get(
            f"{ANNOTATION_POLICY}.{name}", workload.annotations.get(ANNOTATION_POLICY)
        )
        try:
            tagged = followed_key(image, policy)
            target = Target(
                cluster=cluster,
                namespace=workload.namespace,
                kind=workload.kind,
                name=workload.name,
                container=name,
            )
        except ValueError as exc:  # a digest-only image has no tag to follow; pydantic errors too
            notes.append(f"{where}/{name}: not followed: {_short(str(exc), NOTE_MAX)}")
            continue
        found.append((tagged, target))
    return found, notes


def followed_key(image: str, policy: str | None) -> FollowedKey:
    """What a container's image follows: its tag, or with a version policy annotation the channel
    of its repository named by the policy (tagpin.domain.channels)."""
    ref = ImageRef.parse(image)
    if policy is None or not policy.strip():
        return FollowedKey.of(ref)
    parsed = VersionPolicy.parse(policy)
    if not parsed.chooses:
        return FollowedKey.of(ref)
    return FollowedKey.of(ChannelKey(ImageRef(ref.registry, ref.repository, None, None), parsed.text))
