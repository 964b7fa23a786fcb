"""Minimal manifests for tests, the local stack and the demo: Deployment, StatefulSet, DaemonSet,
CronJob, Argo Rollout and Namespace, as a person would write them (the API server fills the rest).

``progress_deadline`` (Deployment, Rollout) is ``spec.progressDeadlineSeconds``: the real
deployment controller (and Argo's) reports a rollout whose pods never become available only after
it, 600 s when unset. Tests of a broken image give a few seconds.
"""

from __future__ import annotations

from typing import Any

type Obj = dict[str, Any]


def _pod_template(image: str, container: str, labels: dict[str, str]) -> Obj:
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
    progress_deadline: int | None = None,
) -> Obj:
    """An apps/v1 Deployment (selector ``app=<name>``); ``labels`` go on the object."""
    selector = {"app": name}
    spec: Obj = {
        "replicas": replicas,
        "selector": {"matchLabels": selector},
        "template": _pod_template(image, container, selector),
    }
    if progress_deadline is not None:
        spec["progressDeadlineSeconds"] = progress_deadline
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }


def statefulset(
    name: str,
    namespace: str,
    image: str,
    container: str = "app",
    replicas: int = 1,
    labels: dict[str, str] | None = None,
) -> Obj:
    """An apps/v1 StatefulSet."""
    obj = deployment(name, namespace, image, container, replicas, labels)
    obj["kind"] = "StatefulSet"
    obj["spec"]["serviceName"] = name
    return obj


def daemonset(
    name: str, namespace: str, image: str, container: str = "app", labels: dict[str, str] | None = None
) -> Obj:
    """An apps/v1 DaemonSet (one pod per node)."""
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
    """A batch/v1 CronJob (no job controller runs: it never starts a Job)."""
    template = _pod_template(image, container, {"app": name})
    template["spec"]["restartPolicy"] = "OnFailure"
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": template}}},
    }


def rollout(
    name: str,
    namespace: str,
    image: str,
    container: str = "app",
    replicas: int = 2,
    labels: dict[str, str] | None = None,
    steps: list[Obj] | None = None,
    progress_deadline: int | None = None,
) -> Obj:
    """An argoproj.io/v1alpha1 Rollout with a canary strategy: ``steps`` (default one ``setWeight``
    step; ``{"pause": {}}`` holds it until promoted)."""
    obj = deployment(name, namespace, image, container, replicas, labels, progress_deadline)
    obj["apiVersion"], obj["kind"] = "argoproj.io/v1alpha1", "Rollout"
    obj["spec"]["strategy"] = {"canary": {"steps": [{"setWeight": 50}] if steps is None else steps}}
    return obj


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
