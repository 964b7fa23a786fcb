"""Argo Rollouts in a local cluster: its published CRD and a small stand-in for its controller.

The CRD is Argo Rollouts' own ``manifests/crds/rollout-crd.yaml`` (the release pinned in
tools/kube/versions.env, copied beside the binaries by tools/kube/build.sh): the API server
validates, prunes and serves Rollouts exactly as in a cluster where Argo Rollouts is installed
(status subresource, scale subresource, no strategic merge patch).

:class:`ArgoRollouts` plays the controller's part tagpin depends on, and nothing else: it watches
Rollouts and their ReplicaSets and, per :func:`.argo_steps.decide`, creates and scales one
ReplicaSet per pod template (the real replicaset controller makes the pods, kwok makes them Ready
or not) and writes ``status`` (``phase``, ``message``, ``stableRS``, ``currentPodHash``,
``pauseConditions``, ``abort``...) through the status subresource. What is simulated, step by step,
is written in :mod:`.argo_steps`. Not simulated: Services, traffic routing, analysis, experiments,
anti-affinity, ``scaleDownDelaySeconds``, HPA. ``promote`` and ``abort`` write what the
``kubectl argo rollouts`` plugin writes (``status.pauseConditions: null``; ``status.abort: true``).
"""

from __future__ import annotations

import heapq
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import yaml
from kubernetes import client, watch
from kubernetes.client import ApiException

from .argo_steps import HASH_LABEL, REVISION, Decision, Progress, decide, same_status
from .binaries import ROLLOUT_CRD, bin_dir

log = logging.getLogger("tagpin.local.argo")

GROUP, VERSION, PLURAL = "argoproj.io", "v1alpha1", "rollouts"
MERGE = "application/merge-patch+json"
type Obj = dict[str, Any]
type Key = tuple[str, str]  # namespace, name


def install_crd(api: client.ApiClient, timeout: float = 60.0) -> None:
    """Create Argo Rollouts' CRD and wait until it is served."""
    crd = yaml.safe_load((bin_dir() / ROLLOUT_CRD).read_text())
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(crd)
    except ApiException as e:
        if e.status != 409:
            raise
    deadline = time.monotonic() + timeout
    while True:
        got = ext.read_custom_resource_definition(crd["metadata"]["name"])
        conditions = (got.status.conditions if got.status else None) or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {crd['metadata']['name']} not Established in {timeout} s")
        time.sleep(0.05)


class ArgoRollouts:
    """The stand-in controller of one cluster (three daemon threads: two watches and a worker)."""

    def __init__(self, api: client.ApiClient, watch_api: client.ApiClient) -> None:
        self._api = api
        self._custom = client.CustomObjectsApi(api)
        self._watch_custom = client.CustomObjectsApi(watch_api)
        self._stop = threading.Event()
        self._due: list[tuple[float, Key]] = []  # a heap of (when, rollout)
        self._wake = threading.Condition()
        self._progress: dict[Key, Progress] = {}
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []  # what the worker could not do (tests print it on failure)

    # -- what a person does (kubectl argo rollouts ...)
    def promote(self, namespace: str, name: str) -> None:
        """Past a pause step, as ``kubectl argo rollouts promote`` does: the pause conditions cleared."""
        self._status_patch(namespace, name, {"status": {"pauseConditions": None}})

    def abort(self, namespace: str, name: str) -> None:
        """``kubectl argo rollouts abort``: back to the stable ReplicaSet, ``Degraded``."""
        self._status_patch(namespace, name, {"status": {"abort": True}})

    # -- lifecycle
    def start(self) -> ArgoRollouts:
        for target, name in (
            (lambda: self._watch("argoproj.io", "v1alpha1", "rollouts", None, self._on_rollout), "rollouts"),
            (lambda: self._watch("apps", "v1", "replicasets", HASH_LABEL, self._on_replica_set), "rs"),
            (self._work, "worker"),
        ):
            thread = threading.Thread(target=target, name=f"argo-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        for thread in self._threads:
            thread.join(timeout=6)
        self._threads.clear()

    # -- events
    def _enqueue(self, key: Key, delay: float = 0.0) -> None:
        with self._wake:
            heapq.heappush(self._due, (time.monotonic() + delay, key))
            self._wake.notify()

    def _on_rollout(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        self._enqueue((meta.get("namespace", ""), meta.get("name", "")))

    def _on_replica_set(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        for owner in meta.get("ownerReferences") or []:
            if owner.get("kind") == "Rollout" and owner.get("apiVersion", "").startswith(GROUP):
                self._enqueue((meta.get("namespace", ""), owner.get("name", "")))

    def _watch(
        self, group: str, version: str, plural: str, selector: str | None, seen: Callable[[Obj], None]
    ) -> None:
        """LIST, then WATCH from its resourceVersion; again from a LIST when the watch ends."""
        kwargs: dict[str, Any] = {"label_selector": selector} if selector else {}
        while not self._stop.is_set():
            try:
                listed = cast(
                    Obj, self._watch_custom.list_cluster_custom_object(group, version, plural, **kwargs)
                )
                for item in listed.get("items") or []:
                    seen(item)
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self._watch_custom.list_cluster_custom_object,
                    group,
                    version,
                    plural,
                    resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=5,
                    _request_timeout=15,
                    **kwargs,
                )
                for event in stream:
                    if isinstance(event.get("object"), dict) and event.get("type") != "ERROR":
                        seen(event["object"])
                    if self._stop.is_set():
                        return
            except Exception as exc:  # the API server went away (stopping) or a 410: list again
                if self._stop.is_set():
                    return
                log.debug("argo watch of %s: %s", plural, exc)
                self._stop.wait(0.5)

    def _work(self) -> None:
        while not self._stop.is_set():
            with self._wake:
                while not self._stop.is_set() and (not self._due or self._due[0][0] > time.monotonic()):
                    wait = self._due[0][0] - time.monotonic() if self._due else 1.0
                    self._wake.wait(max(0.01, min(wait, 1.0)))
                if self._stop.is_set():
                    return
                _, key = heapq.heappop(self._due)
                # the same rollout due now more than once: one reconcile
                self._due = [(when, k) for when, k in self._due if k != key or when > time.monotonic()]
                heapq.heapify(self._due)
            try:
                self._reconcile(key)
            except ApiException as exc:
                if exc.status != 409:  # a conflict: the next event brings it back
                    self.errors.append(f"{key}: {exc.status} {exc.reason}")
                self._enqueue(key, 0.2)
            except Exception as exc:
                if self._stop.is_set():
                    return
                self.errors.append(f"{key}: {type(exc).__name__}: {exc}")
                self._enqueue(key, 0.5)

    # -- the controller's writes
    def _reconcile(self, key: Key) -> None:
        namespace, name = key
        try:
            rollout = cast(
                Obj, self._custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            )
        except ApiException as exc:
            if exc.status == 404:
                self._progress.pop(key, None)
                return
            raise
        uid = rollout["metadata"]["uid"]
        listed = cast(
            Obj,
            self._custom.list_namespaced_custom_object(
                "apps", "v1", namespace, "replicasets", label_selector=HASH_LABEL
            ),
        )
        sets = [
            rs
            for rs in listed.get("items") or []
            if any(o.get("uid") == uid for o in rs["metadata"].get("ownerReferences") or [])
        ]
        progress = self._progress.setdefault(key, Progress())
        decision = decide(rollout, sets, time.time(), progress)
        self._apply(rollout, decision)
        if decision.again_in is not None:
            self._enqueue(key, decision.again_in)

    def _apply(self, rollout: Obj, decision: Decision) -> None:
        """The decision's writes. The Rollout's are conditional on the resourceVersion read, as a
        controller's are: a person's change meanwhile (a promote, an abort) is a 409, and the
        Rollout is read again, never overwritten."""
        meta = rollout["metadata"]
        namespace, name, version = meta["namespace"], meta["name"], meta["resourceVersion"]
        if decision.revision is not None:
            patch = {"metadata": {"annotations": {REVISION: decision.revision}, "resourceVersion": version}}
            done = cast(
                Obj,
                self._custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, patch),
            )
            version = done["metadata"]["resourceVersion"]
        if decision.create is not None:
            self._create_replica_set(rollout, decision.create, decision.create_replicas)
        for rs_name, replicas in decision.scale.items():
            self._custom.patch_namespaced_custom_object(
                "apps", "v1", namespace, "replicasets", rs_name, {"spec": {"replicas": replicas}}
            )
        old = rollout.get("status") or {}
        if not same_status(old, decision.status):
            gone = {k: None for k in old if k not in decision.status}  # a merge patch removes with null
            body = {"metadata": {"resourceVersion": version}, "status": {**gone, **decision.status}}
            self._status_patch(namespace, name, body)

    def _create_replica_set(self, rollout: Obj, template_hash: str, replicas: int) -> None:
        meta, spec = rollout["metadata"], rollout["spec"]
        template = json.loads(json.dumps(spec.get("template") or {}))
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = template_hash
        selector = json.loads(json.dumps(spec.get("selector") or {}))
        selector.setdefault("matchLabels", {})[HASH_LABEL] = template_hash
        owner = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Rollout",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        labels = {**(template["metadata"].get("labels") or {})}
        revision = (meta.get("annotations") or {}).get(REVISION, "1")
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{template_hash}",
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": {REVISION: revision},
                "ownerReferences": [owner],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": template},
        }
        try:
            self._custom.create_namespaced_custom_object("apps", "v1", meta["namespace"], "replicasets", body)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def _status_patch(self, namespace: str, name: str, body: Obj) -> None:
        self._custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, body, _content_type=MERGE
        )
