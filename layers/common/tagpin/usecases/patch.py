"""What tagpin writes on a workload: the pinned image of one container (an ``ImageChange``, made
only at the ``resourceVersion`` read), and the annotations that make the change visible with
``kubectl describe``. Also the inverse: putting the previous image back (a rollback), except on a
workload whose own controller does that (``Workload.manages_own_rollback``: Argo Rollouts). How
the change reaches a workload of one kind is its profile's (``tagpin.domain.kinds``).

A 409 (the workload changed between read and patch) is retried with a fresh read, up to
``CONFLICT_RETRIES`` attempts, after a doubling pause with jitter (``CONFLICT_BACKOFF_S``): a
workload in the middle of a rollout has its status written by its controller several times a
second, and attempts made back to back could all land between two of those writes (CI saw five
in 0.9 s all refused, on a loaded machine, and the target recorded failed). About 1.5 s in all.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime

from tagpin.domain.annotations import (
    ANNOTATION_APPLIED_AT,
    ANNOTATION_DIGESTS,
    ANNOTATION_ROLLED_BACK,
    ANNOTATION_TRIGGER,
    json_note,
)
from tagpin.domain.config import Kind, Target
from tagpin.domain.outcomes import RestoreOutcome
from tagpin.domain.refs import Digest, ImageRef, InvalidReference, familiar
from tagpin.ports.workloads import Conflict, ImageChange, Workload, Workloads

logger = logging.getLogger(__name__)

CONFLICT_RETRIES = 6
CONFLICT_BACKOFF_S = 0.05  # before the second attempt; doubled before each next one (x0.5-1.5)


def pinned_image(current: str, image: str, digest: Digest) -> str:
    """``<name as the workload writes it>:<tag>@<digest>``; the tag stays readable.

    The workload's own spelling of the repository (``nginx``, ``docker.io/library/nginx``) is kept
    when it names the followed repository; otherwise the followed image's familiar name is used.
    """
    followed = ImageRef.parse(image)
    name = familiar(ImageRef(followed.registry, followed.repository, None, None))
    try:
        running = ImageRef.parse(current)
    except InvalidReference:
        running = None
    if running is not None and running.name == followed.name:
        written = current.split("@", 1)[0]
        head, _, tail = written.rpartition(":")
        name = head if head and "/" not in tail else written
    return f"{name}:{followed.tag}@{digest}"


def tagpin_annotations(
    workload: Workload, container: str, digest: str | None, now_ms: int, trigger: str, **more: str
) -> dict[str, str]:
    """tagpin's pod-template annotations after moving ``container`` to ``digest`` (None: an image
    without a digest, which leaves the container out of ``tagpin.dev/digests``)."""
    digests = _json_map(workload.template_annotations.get(ANNOTATION_DIGESTS))
    if digest is None:
        digests.pop(container, None)
    else:
        digests[container] = digest
    return {
        ANNOTATION_DIGESTS: json.dumps(digests, sort_keys=True, separators=(",", ":")),
        ANNOTATION_APPLIED_AT: datetime.fromtimestamp(now_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        ANNOTATION_TRIGGER: trigger,
        **more,
    }


def patch_with_retries[T](
    workloads: Workloads,
    kind: Kind,
    namespace: str,
    name: str,
    step: Callable[[Workload], tuple[T, ImageChange | None]],
    what: str,
) -> T:
    """Read the workload, let ``step`` decide (its answer, and the change to make or None), make
    it; on a 409 read again. ``what`` names the target in the log."""
    for attempt in range(CONFLICT_RETRIES):
        if attempt:
            time.sleep(CONFLICT_BACKOFF_S * 2 ** (attempt - 1) * random.uniform(0.5, 1.5))  # noqa: S311
        answer, change = step(workloads.get(namespace, kind, name))
        if change is None:
            return answer
        try:
            workloads.set_image(namespace, kind, name, change)
            return answer
        except Conflict:
            logger.info("conflict; re-reading", extra={"target": what})
    raise Conflict(f"still conflicting after {CONFLICT_RETRIES} attempts")


def restore(
    workloads: Workloads,
    target: Target,
    previous: str | None,
    digest: Digest,
    now: int,
    stop: Callable[[], RestoreOutcome | None] = lambda: None,
) -> RestoreOutcome:
    """Put ``previous`` back on the target's container if it still runs ``digest``.

    ``stop`` is asked after each read of the workload, before anything is decided on it: an
    outcome stops the put-back there (nothing is written; that outcome is returned), None lets it
    go on. The state it reads and the workload cannot be written as one, so what changes between
    that read and the PATCH is not seen: the window is one call. The rollback stops on a hold
    (``HELD``: a person put the target on hold since its state was read); the consumer's put-back
    once the hold that asked for it is gone (``RELEASED``)."""

    def step(workload: Workload) -> tuple[RestoreOutcome, ImageChange | None]:
        stopped = stop()
        if stopped is not None:
            return stopped, None
        current = workload.image_of(target.container)
        if previous is not None and current == previous:
            return RestoreOutcome.RESTORED, None  # by an earlier attempt
        if current is None or not current.endswith("@" + digest):
            return RestoreOutcome.NOT_RUNNING, None
        if workload.manages_own_rollback:
            # Argo Rollouts aborts the canary or blue-green rollout itself and keeps (or puts back)
            # its stable ReplicaSet; a patch from tagpin would race that abort and start yet another
            # rollout under Argo's steps. The failure is recorded and the digest marked bad all the same.
            return RestoreOutcome.LEFT_TO_ARGO, None
        if previous is None or previous.endswith("@" + digest):
            return RestoreOutcome.NO_PREVIOUS, None
        return RestoreOutcome.RESTORED, image_back(workload, target.container, previous, digest, now)

    return patch_with_retries(workloads, target.kind, target.namespace, target.name, step, target.id)


def image_back(workload: Workload, container: str, previous: str, digest: str, now: int) -> ImageChange:
    """The change that puts ``previous`` back on ``container`` in place of ``digest`` (a rollback's
    and an interrupted patch's put-back alike), with tagpin's notes on the pod template."""
    _name, at, was = previous.rpartition("@")
    notes = tagpin_annotations(
        workload, container, was if at else None, now, "rollback", **{ANNOTATION_ROLLED_BACK: digest}
    )
    init = container not in workload.containers
    return ImageChange(workload.resource_version, container, init, previous, notes)


def _json_map(text: str | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in json_note(text).items()}
