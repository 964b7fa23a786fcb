"""Minimal manifests for tests and the local stack: Deployment, StatefulSet, DaemonSet, CronJob, Argo
Rollout, Namespace."""

from __future__ import annotations

from .resources import Obj


def _pod_template(name: str, image: str, container: str, labels: dict[str, str]) -> Obj:
    return {
        "metadata": {"labels": dict(labels)},
        "spec": {"containers": [{"name": container, "image": image}]},
    }


def deployment(
    name: str,
    namespace: str,
    image: str,
    container: str = "app",
    replicas: int = 2,
    labels: dict[str, str] | None = None,
) -> Obj:
    """A minimal apps/v1 Deployment manifest (selector ``app=<name>``); ``labels`` go on the object."""
    sel = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": sel},
            "template": _pod_template(name, image, container, sel),
        },
    }


def statefulset(
    name: str,
    namespace: str,
    image: str,
    container: str = "app",
    replicas: int = 1,
    labels: dict[str, str] | None = None,
) -> Obj:
    """A minimal apps/v1 StatefulSet manifest."""
    obj = deployment(name, namespace, image, container, replicas, labels)
    obj["kind"] = "StatefulSet"
    obj["spec"]["serviceName"] = name
    return obj


def daemonset(
    name: str, namespace: str, image: str, container: str = "app", labels: dict[str, str] | None = None
) -> Obj:
    """A minimal apps/v1 DaemonSet manifest (one Pod per simulated node)."""
    obj = deployment(name, namespace, image, container, 1, labels)
    obj["kind"] = "DaemonSet"
    del obj["spec"]["replicas"]
    return obj


def cronjob(
    name: str,
    namespace: str,
    image: str,
    container: str = "job",
    schedule: str = "*/5 * * * *",
    labels: dict[str, str] | None = None,
) -> Obj:
    """A minimal batch/v1 CronJob manifest."""
    tmpl = _pod_template(name, image, container, {"app": name})
    tmpl["spec"]["restartPolicy"] = "OnFailure"
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": tmpl}}},
    }


def rollout(
    name: str,
    namespace: str,
    image: str,
    container: str = "app",
    replicas: int = 2,
    labels: dict[str, str] | None = None,
    steps: list[Obj] | None = None,
) -> Obj:
    """A minimal argoproj.io/v1alpha1 Rollout with a canary strategy: ``steps`` (default one
    ``setWeight`` step; ``{"pause": {}}`` holds it until promoted)."""
    obj = deployment(name, namespace, image, container, replicas, labels)
    obj["apiVersion"], obj["kind"] = "argoproj.io/v1alpha1", "Rollout"
    canary_steps = [{"setWeight": 50}] if steps is None else steps
    obj["spec"]["strategy"] = {"canary": {"steps": canary_steps}}
    return obj


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def node(name: str, platform: str = "linux/amd64") -> Obj:
    """A Node whose ``status.nodeInfo`` reports ``platform`` (``os/architecture``), as the kubelet does."""
    os_, architecture = platform.split("/")[:2]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/arch": architecture, "kubernetes.io/os": os_}},
        "status": {"nodeInfo": {"architecture": architecture, "operatingSystem": os_}},
    }
