"""The controllers tagpin cares about (and the kubelet's part).

A new pod template "rolls out" (at once, or after ``rollout_delay``) into workload status and Pods
whose ``imageID`` carries a digest.

Argo Rollouts (``Rollout``) report what its controller reports: ``status.phase`` ``Progressing``
while a new template rolls out, ``Healthy`` once it is the stable one (``stableRS ==
currentPodHash``), ``Degraded`` when it cannot (a broken image: the stable Pods stay), and
``Paused`` at a pause step of ``spec.strategy.canary.steps`` (with or without a duration: it holds
until promoted, :meth:`~.store.Store.promote_rollout`); ``observedGeneration`` is a string, as
Argo writes it. The first rollout of a Rollout skips its steps, as Argo's does. Blue-green
strategies roll out like a canary without steps (no preview, no promotion pause).
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import uuid
from typing import Any

from .defaults import apply_defaults, pod_template_of
from .replicasets import ReplicaSets, replica_set_uid
from .resources import Obj, _now, find_resource
from .state import Key, KeyList, ObjList

_ARGO_REVISION = "rollout.argoproj.io/revision"
_ARGO_HASH = "rollouts-pod-template-hash"


def fake_digest(image: str) -> str:
    """A stable fake ``sha256:`` digest derived from the image reference."""
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


def image_repo(image: str) -> str:
    """``reg:5000/a/b:tag@sha256:..`` -> ``reg:5000/a/b``."""
    ref = image.split("@", 1)[0]
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    return ref[:colon] if colon > slash else ref


def _hash10(value: Any) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:10])


class Controllers(ReplicaSets):
    """Workload controllers: Pods from the pod template, their status (``imageID``), rollouts and
    revisions. The store calls in on every write, with the lock held."""

    # -- knobs
    def break_image(self, digest_or_image: str) -> None:
        """Pods of this digest (or image reference) never become available: every rollout to it
        fails (Deployment: Progressing=False/ProgressDeadlineExceeded; Rollout: phase Degraded;
        StatefulSet and DaemonSet: the update never progresses) and the old Pods stay."""
        with self._lock:
            self.broken.add(digest_or_image)

    def _broken(self, obj: Obj) -> bool:
        if self.fail_rollouts:
            return True
        spec = (pod_template_of(obj) or {}).get("spec") or {}
        images = [
            str(c.get("image", ""))
            for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
        ]
        return any(bad in image for bad in self.broken for image in images)

    # -- Python API for tests and the local stack
    def pods_for(self, kind: str, namespace: str, name: str) -> ObjList:
        """The Pods the simulated controller made for a workload."""
        key = (find_resource(kind).kind, namespace, name)
        with self._lock:
            return [copy.deepcopy(self._objects[k]) for k in self._owned.get(key, []) if k in self._objects]

    # -- controllers
    def _image_id(self, image: str) -> str:
        repo = image_repo(image)
        if "@sha256:" in image:
            return f"{repo}@{image.split('@', 1)[1]}"
        found = self.image_id_for(image) if self.image_id_for else None
        if found and "@" in found:
            return found
        if found:
            return f"{repo}@{found if found.startswith('sha256:') else 'sha256:' + found}"
        return f"{repo}@{fake_digest(image)}"

    def _pod_status(self, pod: Obj) -> None:
        now = pod["metadata"].get("creationTimestamp") or _now()
        spec = pod["spec"]

        def cstatus(c: Obj, init: bool) -> Obj:
            image = str(c["image"])
            state = (
                {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}
                if init
                else {"running": {"startedAt": now}}
            )
            return {
                "name": c["name"],
                "image": image,
                "imageID": self._image_id(image),
                "containerID": "containerd://" + _hash10([pod["metadata"]["name"], c["name"]]) * 6,
                "ready": not init,
                "started": not init,
                "restartCount": 0,
                "state": state,
                "lastState": {},
            }

        cond = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
        status: Obj = {
            "phase": "Running",
            "conditions": cond,
            "hostIP": "10.0.0.1",
            "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": f"10.244.0.{self._rv % 250 + 2}",
            "podIPs": [{"ip": f"10.244.0.{self._rv % 250 + 2}"}],
            "startTime": now,
            "qosClass": "BestEffort",
            "containerStatuses": [cstatus(c, False) for c in spec.get("containers") or []],
        }
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [cstatus(c, True) for c in spec["initContainers"]]
        pod["status"] = status

    def _initial_status(self, obj: Obj) -> Obj:
        kind = obj["kind"]
        if kind == "StatefulSet":
            return {"replicas": 0, "availableReplicas": 0}
        if kind == "DaemonSet":
            return {
                "currentNumberScheduled": 0,
                "desiredNumberScheduled": 0,
                "numberMisscheduled": 0,
                "numberReady": 0,
            }
        return {}

    def _desired(self, obj: Obj) -> int:
        if obj["kind"] == "DaemonSet":
            return self.nodes
        if obj["kind"] == "CronJob":
            return 0
        return int(obj["spec"].get("replicas", 1))

    def _rollout(self, obj: Obj, template_changed: bool) -> None:
        key: Key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        if old_timer := self._timers.pop(key, None):
            old_timer.cancel()
        if obj["kind"] == "CronJob":
            return
        if obj["kind"] == "Deployment" and template_changed:  # its ReplicaSet, the next revision
            self._new_revision(obj, _hash10(pod_template_of(obj)))
        if obj["kind"] == "Rollout" and template_changed:
            notes = obj["metadata"].setdefault("annotations", {})
            notes[_ARGO_REVISION] = str(int(notes.get(_ARGO_REVISION, "0")) + 1)
        if obj["kind"] == "Rollout" and template_changed:  # a new template starts at the first step
            obj["status"]["currentStepIndex"] = 0
            for gone in ("pauseConditions", "controllerPause"):
                obj["status"].pop(gone, None)
        if self.rollout_delay <= 0 or not template_changed:
            self._finish_rollout(obj)
            return
        self._progressing_status(obj)
        gen = obj["metadata"]["generation"]
        timer = threading.Timer(self.rollout_delay, self._finish_later, args=(key, gen))
        timer.daemon = True
        self._timers[key] = timer
        timer.start()

    def _resume_rollout(self, obj: Obj) -> None:
        """A Rollout promoted past its pause step goes on to the next step (at once, or after
        ``rollout_delay``): another pause step, or the end of the rollout."""
        st = obj["status"]
        if st.get("phase") != "Paused":
            return
        st["currentStepIndex"] = int(st.get("currentStepIndex") or 0) + 1
        for gone in ("pauseConditions", "controllerPause"):
            st.pop(gone, None)
        key: Key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        if old_timer := self._timers.pop(key, None):
            old_timer.cancel()
        if self.rollout_delay <= 0:
            self._finish_rollout(obj)
            return
        self._progressing_status(obj)
        timer = threading.Timer(
            self.rollout_delay, self._finish_later, args=(key, obj["metadata"]["generation"])
        )
        timer.daemon = True
        self._timers[key] = timer
        timer.start()

    def _pause_rollout(self, obj: Obj, thash: str) -> bool:
        """Hold a Rollout at the next pause step of its canary, if any (not on its first rollout)."""
        st = obj["status"]
        if not st.get("stableRS") or st.get("stableRS") == thash:
            return False  # the first rollout, or back to the stable template: no steps
        steps = ((obj["spec"].get("strategy") or {}).get("canary") or {}).get("steps") or []
        start = int(st.get("currentStepIndex") or 0)
        index = next((i for i in range(start, len(steps)) if "pause" in (steps[i] or {})), None)
        if index is None:
            return False
        st.update(
            observedGeneration=str(obj["metadata"]["generation"]),
            phase="Paused",
            message="CanaryPauseStep",
            currentPodHash=thash,
            currentStepIndex=index,
            updatedReplicas=0,
            controllerPause=True,
            pauseConditions=[{"reason": "CanaryPauseStep", "startTime": _now()}],
        )
        st["conditions"] = [
            self._condition("Progressing", "Unknown", "RolloutPaused", "Rollout is paused"),
            self._condition("Paused", "True", "RolloutPaused", "Rollout is paused"),
        ]
        return True

    def _finish_later(self, key: Key, generation: int) -> None:
        with self._lock:
            self._timers.pop(key, None)
            obj = self._objects.get(key)
            if obj is None or obj["metadata"].get("generation") != generation:
                return
            self._finish_rollout(obj)
            obj["metadata"]["resourceVersion"] = self._next_rv()

    def _condition(self, ctype: str, status: str, reason: str, message: str) -> Obj:
        now = _now()
        return {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
        }

    def _make_pod(self, obj: Obj, index: int, thash: str) -> Key:
        """Create one Pod for a workload from its current template."""
        kind, ns, name = obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]
        tmpl = pod_template_of(obj) or {}
        self._seq += 1
        labels = dict((tmpl.get("metadata") or {}).get("labels") or {})
        meta: Obj = {}
        if kind in ("Deployment", "Rollout"):  # through a ReplicaSet per template
            pod_name = f"{name}-{thash}-{_hash10([name, self._seq])[:5]}"
            meta["generateName"] = f"{name}-{thash}-"
            labels["pod-template-hash" if kind == "Deployment" else _ARGO_HASH] = thash
            owner: Obj = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-{thash}"}
            owner["uid"] = replica_set_uid(ns, f"{name}-{thash}")
        else:
            if kind == "StatefulSet":
                pod_name = f"{name}-{index}"
                labels["statefulset.kubernetes.io/pod-name"] = pod_name
                labels["apps.kubernetes.io/pod-index"] = str(index)
            else:
                pod_name = f"{name}-{_hash10([name, self._seq])[:5]}"
                meta["generateName"] = f"{name}-"
            labels["controller-revision-hash"] = f"{name}-{thash}"
            owner = {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": obj["metadata"]["uid"]}
        owner.update(controller=True, blockOwnerDeletion=True)
        meta.update(
            name=pod_name,
            namespace=ns,
            labels=labels,
            ownerReferences=[owner],
            uid=str(uuid.uuid4()),
            creationTimestamp=_now(),
            resourceVersion=self._next_rv(),
        )
        if annotations := (tmpl.get("metadata") or {}).get("annotations"):
            meta["annotations"] = dict(annotations)
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": copy.deepcopy(tmpl.get("spec") or {}),
        }
        apply_defaults(pod)
        self._pod_status(pod)
        self._objects[("Pod", ns, pod_name)] = pod
        return ("Pod", ns, pod_name)

    def _progressing_status(self, obj: Obj) -> None:
        """The state right after the controller noticed a new template: nothing updated yet."""
        st = obj["status"]
        gen = obj["metadata"]["generation"]
        name = obj["metadata"]["name"]
        have = len(self._owned.get((obj["kind"], obj["metadata"]["namespace"], name), []))
        if obj["kind"] == "Deployment":
            st.update(observedGeneration=gen, replicas=have, updatedReplicas=0, unavailableReplicas=0)
            rs = f"{name}-{_hash10(pod_template_of(obj))}"
            st["conditions"] = [
                self._condition(
                    "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."
                ),
                self._condition(
                    "Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{rs}" is progressing.'
                ),
            ]
        elif obj["kind"] == "StatefulSet":
            st.update(
                observedGeneration=gen, updatedReplicas=0, updateRevision=f"{name}-{_hash10(obj['spec'])}"
            )
        elif obj["kind"] == "DaemonSet":
            st.update(observedGeneration=gen, updatedNumberScheduled=0)
        elif obj["kind"] == "Rollout":
            st.update(
                observedGeneration=str(gen),
                phase="Progressing",
                message="more replicas need to be updated",
                currentPodHash=_hash10(pod_template_of(obj)),
                updatedReplicas=0,
            )

    def _fail_rollout(self, obj: Obj, thash: str, want: int) -> None:
        """A rollout whose Pods never become available: the old Pods stay."""
        kind, name = obj["kind"], obj["metadata"]["name"]
        gen = obj["metadata"]["generation"]
        st = obj["status"]
        st["observedGeneration"] = gen
        if kind == "StatefulSet":
            st.update(updatedReplicas=0, updateRevision=f"{name}-{thash}")
        elif kind == "DaemonSet":
            st.update(updatedNumberScheduled=0, numberUnavailable=want)
        elif kind == "Rollout":
            message = f'ReplicaSet "{name}-{thash}" has timed out progressing.'
            st.update(
                observedGeneration=str(gen),
                phase="Degraded",
                message=f"ProgressDeadlineExceeded: {message}",
                currentPodHash=thash,
                updatedReplicas=0,
            )
            for gone in ("pauseConditions", "controllerPause"):
                st.pop(gone, None)
            st["conditions"] = [self._condition("Progressing", "False", "ProgressDeadlineExceeded", message)]
        if kind == "Deployment":
            st["conditions"] = [
                self._condition(
                    "Available",
                    "True",
                    "MinimumReplicasAvailable",
                    "Deployment has minimum availability.",
                ),
                self._condition(
                    "Progressing",
                    "False",
                    "ProgressDeadlineExceeded",
                    f'ReplicaSet "{name}-{thash}" has timed out progressing.',
                ),
            ]
            st["updatedReplicas"] = 0

    def _healthy_rollout(self, obj: Obj, thash: str, want: int) -> None:
        """A Rollout whose template is the stable one, every step done."""
        st = obj["status"]
        steps = ((obj["spec"].get("strategy") or {}).get("canary") or {}).get("steps") or []
        st.clear()
        gen = str(obj["metadata"]["generation"])
        st.update(observedGeneration=gen, phase="Healthy", currentPodHash=thash, stableRS=thash)
        st.update(replicas=want, updatedReplicas=want, readyReplicas=want, availableReplicas=want)
        if steps:
            st["currentStepIndex"] = len(steps)
        st["conditions"] = [
            self._condition("Available", "True", "AvailableReason", "Rollout has minimum availability"),
            self._condition(
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                f'ReplicaSet "{obj["metadata"]["name"]}-{thash}" has successfully progressed.',
            ),
            self._condition("Healthy", "True", "RolloutHealthy", "Rollout is healthy"),
        ]

    def _finish_rollout(self, obj: Obj) -> None:
        """Replace the workload's Pods with ones from the current template and report success."""
        kind, ns, name = obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]
        key: Key = (kind, ns, name)
        gen = obj["metadata"]["generation"]
        want = self._desired(obj)
        tmpl = pod_template_of(obj) or {}
        thash = _hash10(tmpl)
        if self._broken(obj):
            self._fail_rollout(obj, thash, want)
            return
        if kind == "Rollout" and self._pause_rollout(obj, thash):
            return  # held at a canary pause step until promoted; the stable Pods stay
        rev = thash if kind in ("Deployment", "Rollout") else f"{name}-{thash}"
        hash_label = {"Deployment": "pod-template-hash", "Rollout": _ARGO_HASH}.get(
            kind, "controller-revision-hash"
        )
        pods: KeyList = []
        for pod_key in self._owned.pop(key, []):  # keep Pods already on this template, drop the rest
            pod = self._objects.get(pod_key)
            current = pod is not None and pod["metadata"]["labels"].get(hash_label) == rev
            ordinal_ok = kind != "StatefulSet" or int(pod_key[2].rsplit("-", 1)[1]) < want
            if current and ordinal_ok and len(pods) < want:
                pods.append(pod_key)
            else:
                self._objects.pop(pod_key, None)
        for i in range(want):
            if kind == "StatefulSet":
                if ("Pod", ns, f"{name}-{i}") in pods:
                    continue
            elif i < len(pods):
                continue
            pods.append(self._make_pod(obj, i, thash))
        pods.sort()
        self._owned[key] = pods
        st = obj["status"]
        if kind == "Deployment":
            rs = f"{name}-{thash}"
            self._settle_replica_sets(obj, thash, want)
            st.clear()
            st.update(observedGeneration=gen, replicas=want, updatedReplicas=want, readyReplicas=want)
            st.update(availableReplicas=want)
            st["conditions"] = [
                self._condition(
                    "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."
                ),
                self._condition(
                    "Progressing",
                    "True",
                    "NewReplicaSetAvailable",
                    f'ReplicaSet "{rs}" has successfully progressed.',
                ),
            ]
            if want == 0:
                for k in ("readyReplicas", "availableReplicas", "updatedReplicas", "replicas"):
                    st.pop(k)
        elif kind == "StatefulSet":
            st.clear()
            st.update(observedGeneration=gen, replicas=want, readyReplicas=want, currentReplicas=want)
            st.update(updatedReplicas=want, availableReplicas=want, currentRevision=rev, updateRevision=rev)
            st["collisionCount"] = 0
        elif kind == "Rollout":
            self._healthy_rollout(obj, thash, want)
        elif kind == "DaemonSet":
            st.clear()
            st.update(currentNumberScheduled=want, desiredNumberScheduled=want, numberMisscheduled=0)
            st.update(
                numberReady=want, numberAvailable=want, updatedNumberScheduled=want, observedGeneration=gen
            )
