"""Apply a change: move every target of a tag to ``repo:tag@<digest>``, once per (target, digest).

The Kubernetes side is a port (``Workloads``); ``tagpin.clusters`` adapts the official client to
it, tests may use the API simulator. Each target is applied through an idempotency guard
(powertools on DynamoDB in the consumer) keyed on target and digest, so a duplicated or replayed
message never rolls a workload twice; the state's conditional claim makes sure an older digest
never replaces a newer one.

Failures split in two. Transient ones (cluster unreachable, 5xx, a conflict that outlasts the
retries) are raised, so the SQS record fails, is retried and ends in the dead-letter queue.
Permanent ones (the workload is gone, RBAC forbids the patch, the container does not exist) are
recorded on the target and reported without failing the message; neither kind is stored by the
idempotency guard, and the poller re-enqueues a target that is behind, so a fixed permission or a
workload created later heals by itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from tagpin.config import FollowedImage, Kind
from tagpin.models import Change, TargetChange
from tagpin.refs import ImageRef, InvalidReference, familiar
from tagpin.state import StateStore, TargetStatus

logger = logging.getLogger(__name__)

ANNOTATION_DIGESTS = "tagpin.dev/digests"
ANNOTATION_APPLIED_AT = "tagpin.dev/applied-at"
ANNOTATION_TRIGGER = "tagpin.dev/trigger"
# Opting in, on the workload (see docs/clusters.md).
LABEL_FOLLOW = "tagpin.dev/follow"  # "true": discovered by the reconciler (server-side selection)
FOLLOW_SELECTOR = f"{LABEL_FOLLOW}=true"
ANNOTATION_PAUSED = "tagpin.dev/paused"  # "true": left alone (not discovered, not patched)
ANNOTATION_CONTAINERS = "tagpin.dev/containers"  # "web,migrate": only these containers
CONFLICT_RETRIES = 5


class WorkloadError(Exception):
    transient = True


class Unreachable(WorkloadError):
    """The cluster cannot be reached, is not ready, or rejected tagpin's credentials."""


class Conflict(WorkloadError):
    """409: the workload changed between read and patch."""


class NotFound(WorkloadError):
    transient = False


class Forbidden(WorkloadError):
    transient = False


def is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "yes", "1", "on")


@dataclass
class Workload:
    """A workload as tagpin reads it: its containers' images, annotations and pod selector."""

    resource_version: str
    containers: dict[str, str]
    init_containers: dict[str, str] = field(default_factory=dict)
    template_annotations: dict[str, str] = field(default_factory=dict)
    kind: Kind = Kind.DEPLOYMENT
    namespace: str = ""
    name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    selector: dict[str, Any] | None = None  # spec.selector (LabelSelector); None for CronJobs

    @property
    def paused(self) -> bool:
        return is_true(self.annotations.get(ANNOTATION_PAUSED))

    def image_of(self, container: str) -> str | None:
        return self.containers.get(container, self.init_containers.get(container))


class Workloads(Protocol):
    def get(self, namespace: str, kind: Kind, name: str) -> Workload: ...

    def patch(self, namespace: str, kind: Kind, name: str, body: dict[str, Any]) -> None: ...


class ChangeFailed(Exception):
    """At least one target failed transiently; the message must be retried."""


class TargetNotApplied(Exception):
    """A permanent failure, recorded on the target. Raised through the idempotency guard so that
    no result is stored for (target, digest): once the cause is fixed, the next enqueue applies."""

    def __init__(self, outcome: dict[str, Any]) -> None:
        super().__init__(outcome.get("error", "not applied"))
        self.outcome = outcome


def pinned_image(current: str, image: str, digest: str) -> str:
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


def template_path(kind: Kind) -> list[str]:
    """Where the pod template sits in a workload of this kind."""
    return ["spec", "jobTemplate", "spec", "template"] if kind is Kind.CRONJOB else ["spec", "template"]


def image_patch(
    kind: Kind,
    resource_version: str,
    container: str,
    init: bool,
    image: str,
    annotations: dict[str, str],
) -> dict[str, Any]:
    """A strategic merge patch for one container's image, with resourceVersion as a precondition.

    Containers merge by name, so the others are untouched.
    """
    template: dict[str, Any] = {
        "metadata": {"annotations": annotations},
        "spec": {("initContainers" if init else "containers"): [{"name": container, "image": image}]},
    }
    body: dict[str, Any] = template
    for key in reversed(template_path(kind)):
        body = {key: body}
    body["metadata"] = {"resourceVersion": resource_version}
    return body


class Applier:
    def __init__(
        self,
        *,
        followed: Callable[[], Mapping[str, FollowedImage]],
        state: StateStore,
        workloads: Callable[[str], Workloads],
        clock: Callable[[], int],
        guard: Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]] | None = None,
    ) -> None:
        self._followed = followed
        self._state = state
        self._workloads = workloads
        self._clock = clock
        self._apply_target = guard(self.apply_target) if guard else self.apply_target

    def apply(self, change: Change) -> list[dict[str, Any]]:
        followed = self._followed().get(change.image)
        if followed is None:
            logger.info(
                "change for an image no longer followed; nothing to do", extra={"image": change.image}
            )
            return []
        current = self._state.get_tag(change.image)
        if (
            current is not None
            and current.digest != change.digest
            and current.observed_at > change.observed_at
        ):
            logger.info(
                "change superseded by a newer digest",
                extra={"image": change.image, "digest": change.digest, "current": current.digest},
            )
            return [{"image": change.image, "outcome": "superseded", "current": current.digest}]
        outcomes: list[dict[str, Any]] = []
        failed: list[str] = []
        for target in followed.targets:
            work = TargetChange(
                target_id=target.id,
                cluster=target.cluster,
                namespace=target.namespace,
                kind=target.kind.value,
                name=target.name,
                container=target.container,
                image=change.image,
                digest=change.digest,
                observed_at=change.observed_at,
                trigger=change.trigger,
                correlation_id=change.correlation_id,
                reconcile_run=change.reconcile_run,
            )
            try:
                outcomes.append(self._apply_target(target_change=work))
            except TargetNotApplied as exc:
                outcomes.append(exc.outcome)
            except WorkloadError as exc:
                failed.append(f"{target.id}: {exc}")
                outcomes.append({"target": target.id, "outcome": "failed", "error": str(exc)})
        if failed:
            raise ChangeFailed("; ".join(failed))
        return outcomes

    def apply_target(self, target_change: TargetChange) -> dict[str, Any]:
        tc = target_change
        kind = Kind(tc.kind)
        if not self._state.claim_target(
            tc.target_id, tc.image, tc.digest, tc.observed_at, tc.trigger, self._clock()
        ):
            return {"target": tc.target_id, "outcome": "superseded"}
        previous: str | None = None
        try:
            workloads = self._workloads(tc.cluster)
            previous, outcome = self._patch(workloads, tc, kind)
        except WorkloadError as exc:
            status = {NotFound: TargetStatus.GONE, Paused: TargetStatus.PAUSED}.get(
                type(exc), TargetStatus.FAILED
            )
            detail = f"{type(exc).__name__}: {exc}"
            self._finish(tc, status, detail=detail)
            logger.warning(
                "apply failed", extra={"target": tc.target_id, "digest": tc.digest, "error": detail}
            )
            if exc.transient:
                raise
            raise TargetNotApplied(
                {"target": tc.target_id, "outcome": status.value, "error": detail}
            ) from None
        self._finish(tc, TargetStatus.APPLIED, detail=outcome, previous=previous)
        logger.info("applied", extra={"target": tc.target_id, "digest": tc.digest, "outcome": outcome})
        return {"target": tc.target_id, "outcome": outcome, "previous_image": previous}

    def _patch(self, workloads: Workloads, tc: TargetChange, kind: Kind) -> tuple[str, str]:
        for _attempt in range(CONFLICT_RETRIES):
            workload = workloads.get(tc.namespace, kind, tc.name)
            if workload.paused:
                raise Paused(f"{kind.value} {tc.namespace}/{tc.name} is annotated {ANNOTATION_PAUSED}")
            init = tc.container not in workload.containers
            current = (workload.init_containers if init else workload.containers).get(tc.container)
            if current is None:
                raise _MissingContainer(
                    f"{kind.value} {tc.namespace}/{tc.name} has no container {tc.container!r}"
                )
            desired = pinned_image(current, tc.image, tc.digest)
            if current == desired:
                return current, "already-current"
            digests = _json_map(workload.template_annotations.get(ANNOTATION_DIGESTS))
            digests[tc.container] = tc.digest
            annotations = {
                ANNOTATION_DIGESTS: json.dumps(digests, sort_keys=True, separators=(",", ":")),
                ANNOTATION_APPLIED_AT: datetime.fromtimestamp(self._clock() / 1000, UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
                ANNOTATION_TRIGGER: tc.trigger,
            }
            body = image_patch(kind, workload.resource_version, tc.container, init, desired, annotations)
            try:
                workloads.patch(tc.namespace, kind, tc.name, body)
                return current, "patched"
            except Conflict:
                logger.info("conflict; re-reading", extra={"target": tc.target_id})
        raise Conflict(f"still conflicting after {CONFLICT_RETRIES} attempts")

    def _finish(
        self, tc: TargetChange, status: TargetStatus, *, detail: str, previous: str | None = None
    ) -> None:
        self._state.finish_target(
            tc.target_id,
            tc.digest,
            status,
            self._clock(),
            trigger=tc.trigger,
            detail=detail,
            previous_image=previous,
            correlation_id=tc.correlation_id,
        )


class _MissingContainer(WorkloadError):
    transient = False


class Paused(WorkloadError):
    """The workload asks to be left alone; recorded, not retried, applied once un-paused."""

    transient = False


def _json_map(text: str | None) -> dict[str, str]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
