"""The cluster side of tagpin, as the use cases see it: workloads to read and change (``Workloads``,
the consumer and the verifier), and what the reconciler lists (``Inventory``).

The port speaks intents, the same for every kind: read a workload (its containers' images, its
annotations, which pods it runs), read its rollout's ``health``, and ``set_image`` of one
container (an ``ImageChange``). What that means for one kind (where its pod template sits, how the
change is sent, how its status is read) is its profile's (``tagpin.domain.kinds``), asked by the
adapter and by ``Workload``; a use case never builds a patch body or reads a raw status.

``tagpin.adapters.kubernetes`` implements both with the official client; tests use the API
simulator through that same adapter, or the in-memory fakes of ``tests/support``.

Errors split in two: ``transient`` ones (the cluster is unreachable, a 5xx, a conflict) are
worth retrying; the others (the workload is gone, RBAC forbids, the container does not exist,
the workload is paused) are recorded and not retried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tagpin.domain.annotations import ANNOTATION_HOLD, ANNOTATION_PAUSED, is_true
from tagpin.domain.kinds import DEFAULT_KIND, Health, ImageChange, Kind, Progress
from tagpin.domain.kinds.profile import selector_matches
from tagpin.domain.platforms import Platform

__all__ = [
    "Conflict",
    "Forbidden",
    "Health",
    "Held",
    "ImageChange",
    "Inventory",
    "MissingContainer",
    "NotFound",
    "Owned",
    "Paused",
    "Pod",
    "Progress",
    "Unreachable",
    "Unreadable",
    "Workload",
    "WorkloadError",
    "Workloads",
]


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


class MissingContainer(WorkloadError):
    transient = False


class Paused(WorkloadError):
    """The workload asks to be left alone; recorded, not retried, applied once un-paused."""

    transient = False


class Unreadable(WorkloadError):
    """The workload's JSON is nested deeper than tagpin's parser reads (the API server takes 10,000
    levels); recorded, not retried."""

    transient = False


class Held(WorkloadError):
    """A person holds the workload (annotated tagpin.dev/hold); recorded, not retried."""

    transient = False


class Owned(WorkloadError):
    """Argo CD or Flux owns the workload and would revert a live patch (``gitops.patch_live`` does
    not name it); recorded, not retried."""

    transient = False


@dataclass
class Workload:
    """A workload as tagpin reads it: its containers' images, annotations and pods' selector, and
    what its kind's profile read of its spec and status (its rollout's health, who rolls back)."""

    resource_version: str
    containers: dict[str, str]
    init_containers: dict[str, str] = field(default_factory=dict)
    template_annotations: dict[str, str] = field(default_factory=dict)
    kind: Kind = DEFAULT_KIND
    namespace: str = ""
    name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    selector: dict[str, Any] | None = None  # its pods (a LabelSelector); None: no pods to read
    # Its rollout's health, as its kind's profile read it from the status the API served; None:
    # nothing served (a workload made in memory): what the profile reads from an empty status.
    rollout: Health | None = None
    # Its own controller undoes a failed rollout (the profile's reading of its spec).
    own_rollback: bool = False
    # Listed, but not readable (why; e.g. nested deeper than the JSON parser goes): only its kind,
    # namespace, name and labels are known. The reconciler skips it and keeps its targets.
    unreadable: str | None = None

    @property
    def paused(self) -> bool:
        return is_true(self.annotations.get(ANNOTATION_PAUSED))

    @property
    def held(self) -> bool:
        return is_true(self.annotations.get(ANNOTATION_HOLD))

    def image_of(self, container: str) -> str | None:
        return self.containers.get(container, self.init_containers.get(container))

    @property
    def health(self) -> Health:
        """Has the rollout of its current generation finished (its kind's rule)?"""
        return self.rollout or self.kind.profile.rollout_health(0, {}, {})

    def health_since(self, began: int) -> Health:
        """``health`` of the rollout begun at ``began`` (epoch ms): a failure recorded before it
        belongs to an earlier rollout (``Health.after``)."""
        return self.health.after(began)

    @property
    def runs_pods(self) -> bool:
        """Whether pods say what it runs (not a CronJob between runs)."""
        return self.kind.profile.selector is not None

    def runs(self, pod: Pod) -> bool:
        """Whether ``pod`` is one of its own (its namespace, its selector)."""
        return pod.namespace == self.namespace and selector_matches(self.selector, pod.labels)

    @property
    def manages_own_rollback(self) -> bool:
        """Its own controller undoes a failed rollout (an Argo Rollout with canary steps or
        analysis, or blue-green): tagpin then records the failure and never patches the previous
        image over it (``tagpin.usecases.patch.restore``)."""
        return self.own_rollback


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    labels: dict[str, str]
    image_ids: dict[str, str]  # container name -> status imageID (init containers too)


class Workloads(Protocol):
    """Read and change workloads in one cluster (consumer, verifier)."""

    def get(self, namespace: str, kind: Kind, name: str) -> Workload: ...

    def set_image(self, namespace: str, kind: Kind, name: str, change: ImageChange) -> None:
        """Set one container's image (and tagpin's annotations); ``Conflict`` when the workload is
        no longer at ``change.resource_version``."""
        ...

    def platforms(self) -> frozenset[Platform] | None:
        """The platforms the cluster's nodes run; None when its nodes may not be listed."""
        ...


class Inventory(Protocol):
    """What the reconciler reads from one cluster."""

    def workloads(self, kind: Kind, selector: str) -> Iterable[Workload]: ...

    def pods(self, namespace: str) -> Iterable[Pod]: ...

    def get(self, namespace: str, kind: Kind, name: str) -> Workload: ...
