"""Kubernetes clusters in memory: ``Workloads`` and ``Inventory`` of ``tagpin.ports.workloads``, as
``tagpin.adapters.kubernetes.KubeWorkloads`` implements them, and the connector that hands them out
(``tagpin.adapters.kubernetes.ClusterConnector``)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from tagpin.domain.config import Kind
from tagpin.domain.platforms import Platform
from tagpin.ports.workloads import (
    Conflict,
    ImageChange,
    Inventory,
    NotFound,
    Pod,
    Unreachable,
    Workload,
    Workloads,
)

type Key = tuple[str, Kind, str]  # (namespace, kind, name)


def served(
    kind: Kind, spec: dict[str, Any], status: dict[str, Any], image: str = "x", generation: int = 2
) -> dict[str, Any]:
    """An object of ``kind`` as the API serves it (to read with the adapter's ``workload_from``):
    ``shop/web`` at ``generation``, ``spec``'s fields beside its pod template (one container,
    ``app``, running ``image``), and ``status``."""
    node: dict[str, Any] = {"metadata": {}, "spec": {"containers": [{"name": "app", "image": image}]}}
    for step in reversed(kind.profile.template):
        node = {step: node}
    node["spec"].update(spec)
    node["metadata"] = {"name": "web", "namespace": "shop", "resourceVersion": "1", "generation": generation}
    node["status"] = status
    return node


def key_of(workload: Workload) -> Key:
    return (workload.namespace, workload.kind, workload.name)


def matches(selector: str, labels: dict[str, str]) -> bool:
    """An equality label selector (``a=b,c=d``), the only kind tagpin sends."""
    terms = [term.split("=", 1) for term in selector.split(",") if term]
    assert all(len(t) == 2 and not t[0].endswith("!") for t in terms), f"unsupported selector {selector!r}"
    return all(labels.get(k) == v for k, v in terms)


class FakeCluster:
    """One cluster. ``items`` holds its workloads by (namespace, kind, name) and ``pod_list`` its pods;
    reads answer copies, as the API server does. A ``set_image`` must carry the workload's current
    resourceVersion (else 409 ``Conflict``); it updates the image and template annotations and
    bumps the resourceVersion, unless ``remember`` is off (accepted, never shown: a forgetful
    workload). ``conflicts``: that many patches find that someone else wrote first.
    ``list_error``/``get_error``/``patch_error`` are raised by those calls (``list_errors``: by the
    LIST of one kind only). ``calls`` records every
    call (``list Deployment``, ``pods shop``, ``get shop/web``, ``patch shop/web``); ``gets`` and
    ``patches`` the arguments of those (the body as the adapter would send it: the kind's profile's
    ``patch_body``)."""

    def __init__(self, workloads: Iterable[Workload] = (), pods: Iterable[Pod] = ()) -> None:
        self.items: dict[Key, Workload] = {}
        self.node_platforms: frozenset[Platform] | None = None
        self.pod_list: list[Pod] = list(pods)
        self.remember = True
        self.conflicts = 0
        self.list_error: Exception | None = None
        self.list_errors: dict[Kind, Exception] = {}
        self.get_error: Exception | None = None
        self.patch_error: Exception | None = None
        self.calls: list[str] = []
        self.gets: list[Key] = []
        self.patches: list[tuple[str, Kind, str, dict[str, Any]]] = []
        self.add(*workloads)

    def add(self, *workloads: Workload) -> None:
        """Create the workloads, or replace those of the same namespace, kind and name."""
        for workload in workloads:
            self.items[key_of(workload)] = workload

    # -- Inventory --------------------------------------------------------------------------------------
    def workloads(self, kind: Kind, selector: str) -> list[Workload]:
        self.calls.append(f"list {kind.value}")
        if (error := self.list_errors.get(kind, self.list_error)) is not None:
            raise error
        return [
            copy.deepcopy(w) for w in self.items.values() if w.kind is kind and matches(selector, w.labels)
        ]

    def pods(self, namespace: str) -> list[Pod]:
        self.calls.append(f"pods {namespace}")
        return [p for p in self.pod_list if p.namespace == namespace]

    # -- Workloads (and Inventory's get) -----------------------------------------------------------------
    def platforms(self) -> frozenset[Platform] | None:
        """``node_platforms``: what the nodes run (None: the nodes may not be listed)."""
        self.calls.append("platforms")
        return self.node_platforms

    def get(self, namespace: str, kind: Kind, name: str) -> Workload:
        self.calls.append(f"get {namespace}/{name}")
        self.gets.append((namespace, kind, name))
        if self.get_error is not None:
            raise self.get_error
        workload = self.items.get((namespace, kind, name))
        if workload is None:
            raise NotFound(f"{kind.value} {namespace}/{name} not found")
        return copy.deepcopy(workload)

    def set_image(self, namespace: str, kind: Kind, name: str, change: ImageChange) -> None:
        self.calls.append(f"patch {namespace}/{name}")
        self.patches.append((namespace, kind, name, kind.profile.patch_body(change)))
        if self.patch_error is not None:
            raise self.patch_error
        workload = self.items.get((namespace, kind, name))
        if workload is None:
            raise NotFound(f"{kind.value} {namespace}/{name} not found")
        if self.conflicts:
            self.conflicts -= 1
            workload.resource_version = str(int(workload.resource_version) + 1)  # someone else wrote
        if change.resource_version != workload.resource_version:
            raise Conflict("the object has been modified")
        if not self.remember:
            return
        (workload.init_containers if change.init else workload.containers)[change.container] = change.image
        workload.template_annotations.update(change.annotations)
        workload.resource_version = str(int(workload.resource_version) + 1)

    def image(self, namespace: str, kind: Kind, name: str, container: str) -> str:
        """What a container of a workload runs now (init containers too)."""
        workload = self.items[(namespace, kind, name)]
        return {**workload.init_containers, **workload.containers}[container]


class FakeClusters:
    """The connector: a cluster's name -> its ``FakeCluster``. A name in ``unreachable``, or one it
    does not know, raises ``Unreachable``, as the real connector does."""

    def __init__(self, **clusters: FakeCluster) -> None:
        self.clusters = clusters
        self.unreachable: set[str] = set()

    def __call__(self, name: str) -> FakeCluster:
        if name in self.unreachable:
            raise Unreachable(f"cluster {name}: connection refused")
        if name not in self.clusters:
            raise Unreachable(f"cluster {name!r} is not in the configuration")
        return self.clusters[name]

    def __getitem__(self, name: str) -> FakeCluster:
        return self.clusters[name]


_workloads: Workloads = FakeCluster()
_inventory: Inventory = FakeCluster()
_connect_workloads: Callable[[str], Workloads] = FakeClusters()
_connect_inventory: Callable[[str], Inventory] = FakeClusters()
