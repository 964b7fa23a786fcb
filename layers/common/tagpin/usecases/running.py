"""What a target runs: the digest in its image field when pinned, else the ``imageID`` its pods
report (``running_digest``: the workload says which pods are its own, by its kind's profile);
unknown (no pods, a CronJob between runs, pods that disagree) is None and counts as behind. Used
by the reconciler's compare step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import Target
from tagpin.domain.refs import ImageRef, InvalidReference, is_digest
from tagpin.ports.workloads import Pod, Workload


def image_id_digest(image_id: str, followed: ImageRef) -> str | None:
    """The digest in a container status ``imageID`` when it names the followed repository.

    Accepts ``repo@sha256:...`` with or without a runtime prefix (``docker-pullable://``,
    ``docker://``) and familiar names (``nginx`` = ``docker.io/library/nginx``). A bare image
    config id (``sha256:...`` without a repository) says nothing about the manifest: None.
    """
    text = image_id.split("://", 1)[-1]
    name, at, digest = text.rpartition("@")
    if not at or not name or not is_digest(digest):
        return None
    try:
        ref = ImageRef.parse(name)
    except InvalidReference:
        return None
    return digest if ref.name == followed.name else None


@dataclass(frozen=True)
class Observed:
    """What a target runs: a digest, or None when unknown (then it counts as behind)."""

    target: Target
    image: FollowedKey
    running: str | None
    how: str  # "pinned", "pods", or why it is unknown


def running_digest(
    workload: Workload, container: str, followed: ImageRef, pods: Callable[[], list[Pod]]
) -> tuple[str | None, str]:
    image = workload.image_of(container)
    if image is None:
        return None, f"no container {container!r}"
    try:
        ref = ImageRef.parse(image)
    except InvalidReference:
        return None, "unparseable image"
    if ref.name != followed.name:
        return None, f"runs another repository ({ref.name})"
    if ref.digest is not None:
        return ref.digest, "pinned"
    if not workload.runs_pods:  # a CronJob between runs
        return None, f"unpinned {workload.kind.value}"
    digests: set[str | None] = set()
    for pod in pods():
        if workload.runs(pod):
            digests.add(image_id_digest(pod.image_ids.get(container, ""), followed))
    if not digests:
        return None, "no pods"
    if len(digests) > 1 or None in digests:
        return None, "pods disagree or report no digest"
    return digests.pop(), "pods"
