"""Where a local stack's clusters come from: started for it (:class:`OwnClusters`, ``tagpin local``
and the demo) or lent by a pool that outlives it (:class:`ClusterPool`, the test session).

Why a pool: a control plane costs 9-17 s of wall time and about 4 CPU-seconds to start and
~600 MiB once running, and idles at about 2% of a core. The suite starts some 25 stacks, one to
four clusters each: starting them anew would add minutes; lending the same few, reset between
stacks (about a second), does not. Separate API servers rather than one server with a namespace
per cluster: the kubelets' knobs (a broken image, a slow pull, the nodes' platforms) and the EKS
authenticator are per API server, and tagpin's configuration names the same namespaces in several
clusters.

:func:`reset` puts a lent cluster back as it started: every namespace but the system ones and
``tagpin-system`` deleted, the workloads and pods of those deleted, the nodes back to kwok's
one, the kubelets' knobs cleared, docs/rbac.yaml restored, no EKS identity, no front.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client import ApiException

from . import rbac
from .cluster import NODE_NAME, KubeCluster
from .kubelet import node

KEEP_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", rbac.NAMESPACE})
RESET_KINDS = (
    ("apps", "v1", "deployments"),
    ("apps", "v1", "statefulsets"),
    ("apps", "v1", "daemonsets"),
    ("apps", "v1", "replicasets"),
    ("apps", "v1", "controllerrevisions"),
    ("batch", "v1", "cronjobs"),
    ("batch", "v1", "jobs"),
    ("argoproj.io", "v1alpha1", "rollouts"),
)


class ClusterSource(Protocol):
    def acquire(self, names: list[str]) -> dict[str, KubeCluster]: ...

    def release(self, clusters: dict[str, KubeCluster]) -> None: ...


class _Default:
    source: ClusterSource | None = None


def use(source: ClusterSource | None) -> None:
    """Where every stack that names no source gets its clusters (the test session: its pool)."""
    _Default.source = source


def default_source(log: Callable[[str], None] | None = None) -> ClusterSource:
    return _Default.source or OwnClusters(log)


def start_all(names: list[str], log: Callable[[str], None] | None = None) -> dict[str, KubeCluster]:
    """Start a control plane per name, side by side; all or none (a failure stops the others)."""
    clusters = {name: KubeCluster(name, log=log) for name in names}
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as starting:
        futures = [starting.submit(cluster.start) for cluster in clusters.values()]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        for cluster in clusters.values():
            cluster.stop()
        raise errors[0]  # type: ignore[misc]
    return clusters


class OwnClusters:
    """Clusters started for one stack and stopped with it."""

    def __init__(self, log: Callable[[str], None] | None = None) -> None:
        self._log = log

    def acquire(self, names: list[str]) -> dict[str, KubeCluster]:
        return start_all(names, self._log)

    def release(self, clusters: dict[str, KubeCluster]) -> None:
        for cluster in clusters.values():
            cluster.stop()


class ClusterPool:
    """Clusters lent to one stack after another, reset in the background when given back."""

    def __init__(self) -> None:
        self._idle: list[KubeCluster] = []
        self._lent: set[KubeCluster] = set()
        self._resetting: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.started = 0  # clusters started, in all
        self.start_s = 0.0  # seconds spent starting them (wall)
        self.reset_s = 0.0  # seconds spent resetting, cluster by cluster (in the background)
        self.waited_s = 0.0  # seconds a stack waited for resets to end
        self.failures: list[str] = []  # clusters that could not be reset (stopped, not lent again)
        self.peak_rss = 0  # bytes: the most all its clusters used at once, as sampled
        self.lends = 0

    def acquire(self, names: list[str]) -> dict[str, KubeCluster]:
        waited = time.monotonic()
        for thread in self._resetting:
            thread.join()
        self._resetting.clear()
        self.waited_s += time.monotonic() - waited
        with self._lock:
            reused = self._idle[: len(names)]
            self._idle = self._idle[len(names) :]
        started = time.monotonic()
        fresh = start_all([f"pool-{self.started + n}" for n in range(len(names) - len(reused))])
        if fresh:
            self.start_s += time.monotonic() - started
            self.started += len(fresh)
        given = dict(zip(names, [*reused, *fresh.values()], strict=True))
        with self._lock:
            self._lent.update(given.values())
            self.lends += 1
        self.sample()
        return given

    def release(self, clusters: dict[str, KubeCluster]) -> None:
        self.sample()

        def put_back(cluster: KubeCluster) -> None:
            started = time.monotonic()
            try:
                reset(cluster)
            except Exception as exc:  # a cluster that cannot be reset is not lent again
                self.failures.append(f"{cluster.name}: {type(exc).__name__}: {exc}")
                cluster.stop()
                with self._lock:
                    self._lent.discard(cluster)
                return
            with self._lock:
                self._lent.discard(cluster)
                self._idle.append(cluster)
                self.reset_s += time.monotonic() - started

        for cluster in clusters.values():  # side by side
            thread = threading.Thread(target=put_back, args=(cluster,), name="kube-pool-reset", daemon=True)
            thread.start()
            self._resetting.append(thread)

    def sample(self) -> int:
        """The resident memory of every cluster of the pool now (bytes); keeps the peak."""
        with self._lock:
            clusters = [*self._idle, *self._lent]
        total = sum(sum(c.rss().values()) for c in clusters)
        self.peak_rss = max(self.peak_rss, total)
        return total

    def close(self) -> None:
        for thread in self._resetting:
            thread.join()
        with self._lock:
            clusters = [*self._idle, *self._lent]
            self._idle.clear()
            self._lent.clear()
        for cluster in clusters:
            cluster.stop()


def reset(kube: KubeCluster, timeout: float = 120.0) -> None:
    """The cluster as it started (see the module's docstring). The workloads go first, then every
    pod at once, without a grace period: the namespace controller, finding pods that are still
    terminating gracefully, waits out their grace period (30 s) before it looks again."""
    api = kube.api_client()
    core, custom, objects = client.CoreV1Api(api), client.CustomObjectsApi(api), kube.objects
    for namespace in _names(objects.list("Namespace")):
        for group, version, plural in RESET_KINDS:
            custom.delete_collection_namespaced_custom_object(
                group, version, namespace, plural, propagation_policy="Background"
            )
    _delete_pods(kube)
    for item in objects.list("Namespace"):
        name = str(item["metadata"]["name"])
        if name not in KEEP_NAMESPACES and (item.get("status") or {}).get("phase") != "Terminating":
            core.delete_namespace(name, propagation_policy="Background")
    for name in _names(objects.list("Node")):
        if name != NODE_NAME:
            core.delete_node(name)
    try:
        core.read_node(NODE_NAME)
    except ApiException as exc:
        if exc.status != 404:
            raise
        core.create_node(node(NODE_NAME))
    kube.drop_front()
    kube.kubelet.reset()
    kube.eks.configure(None)
    rbac.install(api)
    deadline = time.monotonic() + timeout
    while True:
        names = set(_names(objects.list("Namespace")))
        pods = _delete_pods(kube)  # again: a ReplicaSet not collected yet may have made one
        if names <= KEEP_NAMESPACES and not pods and kube.node_ready():
            return
        if time.monotonic() > deadline:
            left = sorted(names - KEEP_NAMESPACES)
            raise TimeoutError(f"kube {kube.name}: not reset in {timeout:.0f} s ({left}, {pods} pods)")
        time.sleep(0.1)


def _names(items: list[dict[str, Any]]) -> list[str]:
    return [str(item["metadata"]["name"]) for item in items]


def _delete_pods(kube: KubeCluster) -> int:
    """Delete every pod at once (no grace period); how many there were."""
    pods = kube.objects.list("Pod")
    core = client.CoreV1Api(kube.api_client())
    for namespace in {str(p["metadata"]["namespace"]) for p in pods}:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    return len(pods)
