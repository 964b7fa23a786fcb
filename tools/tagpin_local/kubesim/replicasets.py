"""A Deployment's ReplicaSets, as the deployment controller keeps them: its rollout history.

Each pod template a Deployment has had is one ReplicaSet ``<name>-<pod-template-hash>``, owned by
the Deployment (a controller ``ownerReference`` with its uid), labelled and selected with
``pod-template-hash``, carrying the template (plus that label) and the Deployment's annotations as
they were while it was the newest, with ``deployment.kubernetes.io/revision``. A template change
makes its ReplicaSet the newest at the next revision: a new one, or an old one reused when the
template returns to it (the real controller's ``getNewReplicaSet``), so revisions only grow. Once a
rollout completes, the newest ReplicaSet has the replicas and the old ones none; old ones beyond
``spec.revisionHistoryLimit`` (default 10) are deleted.

That is what ``kubectl rollout undo`` and ``kubectl rollout history`` read: kubectl lists the
ReplicaSets by the Deployment's selector, keeps those it controls, takes the previous revision's
template and writes it back with a JSON patch of ``/spec/template`` and ``/metadata/annotations``.
Argo Rollouts' ReplicaSets are not modelled (Argo's ``kubectl argo rollouts undo`` is its own
plugin); a Rollout keeps its revision annotation only.
"""

from __future__ import annotations

import copy
import uuid

from .defaults import pod_template_of
from .resources import Obj, _now
from .state import Key, State

REVISION = "deployment.kubernetes.io/revision"
HASH_LABEL = "pod-template-hash"
# Annotations the controller does not copy from a Deployment to its ReplicaSets (and kubectl does
# not copy back on undo): deploymentutil's annotationsToSkip.
SKIPPED = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        "deployment.kubernetes.io/revision-history",
        "deployment.kubernetes.io/desired-replicas",
        "deployment.kubernetes.io/max-replicas",
        "deprecated.deployment.rollback.to",
    }
)


def replica_set_uid(namespace: str, name: str) -> str:
    """A ReplicaSet's uid, stable per name (its Pods' ``ownerReferences`` name it)."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, f"{namespace}/{name}"))


class ReplicaSets(State):
    """The deployment controller's ReplicaSets (call with the lock held)."""

    def replica_sets_of(self, deployment: Obj) -> list[Obj]:
        """The ReplicaSets a Deployment controls, oldest revision first."""
        uid = deployment["metadata"].get("uid")
        ns = deployment["metadata"]["namespace"]
        owned = [
            o
            for (kind, ons, _), o in self._objects.items()
            if kind == "ReplicaSet"
            and ons == ns
            and any(
                r.get("uid") == uid and r.get("controller") for r in o["metadata"].get("ownerReferences", [])
            )
        ]
        return sorted(owned, key=lambda o: int(o["metadata"]["annotations"].get(REVISION, "0")))

    def _new_revision(self, deployment: Obj, thash: str) -> None:
        """The Deployment's template changed (or it was created): its ReplicaSet for the template
        becomes the newest, at the next revision, and the Deployment's annotation says so."""
        meta = deployment["metadata"]
        ns, name = meta["namespace"], meta["name"]
        existing = self.replica_sets_of(deployment)
        revision = (
            max((int(o["metadata"]["annotations"].get(REVISION, "0")) for o in existing), default=0) + 1
        )
        rs_name = f"{name}-{thash}"
        key: Key = ("ReplicaSet", ns, rs_name)
        template = copy.deepcopy(pod_template_of(deployment) or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = thash
        selector = copy.deepcopy(deployment["spec"].get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = thash
        notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in SKIPPED}
        replicas = str(deployment["spec"].get("replicas", 1))
        notes.update(
            {
                REVISION: str(revision),
                "deployment.kubernetes.io/desired-replicas": replicas,
                "deployment.kubernetes.io/max-replicas": replicas,
            }
        )
        rs = self._objects.get(key)
        if rs is None:
            rs = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name,
                    "namespace": ns,
                    "uid": replica_set_uid(ns, rs_name),
                    "creationTimestamp": _now(),
                    "generation": 1,
                    "labels": dict(template["metadata"]["labels"]),
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": name,
                            "uid": meta["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {"replicas": 0, "selector": selector, "template": template},
                "status": {"replicas": 0, "observedGeneration": 1},
            }
            self._objects[key] = rs
        rs["metadata"]["annotations"] = notes
        rs["metadata"]["resourceVersion"] = self._next_rv()
        meta.setdefault("annotations", {})[REVISION] = str(revision)

    def _settle_replica_sets(self, deployment: Obj, thash: str, replicas: int) -> None:
        """A rollout completed: the newest ReplicaSet runs the replicas, the old ones none, and
        old ones beyond the history limit are deleted."""
        name = deployment["metadata"]["name"]
        limit = int(deployment["spec"].get("revisionHistoryLimit", 10))
        owned = self.replica_sets_of(deployment)
        old = [o for o in owned if o["metadata"]["name"] != f"{name}-{thash}"]
        for rs in old[: max(len(old) - limit, 0)]:
            self._objects.pop(("ReplicaSet", rs["metadata"]["namespace"], rs["metadata"]["name"]), None)
        for rs in owned:
            want = replicas if rs["metadata"]["name"] == f"{name}-{thash}" else 0
            if rs["spec"].get("replicas") != want or rs["status"].get("replicas") != want:
                rs["spec"]["replicas"] = want
                rs["status"] = {
                    "replicas": want,
                    "fullyLabeledReplicas": want,
                    "readyReplicas": want,
                    "availableReplicas": want,
                    "observedGeneration": rs["metadata"]["generation"],
                }
                if not want:
                    rs["status"] = {"replicas": 0, "observedGeneration": rs["metadata"]["generation"]}
                rs["metadata"]["resourceVersion"] = self._next_rv()

    def _drop_replica_sets(self, deployment: Obj) -> None:
        """The Deployment is deleted: the garbage collector removes what it owned."""
        for rs in self.replica_sets_of(deployment):
            self._objects.pop(("ReplicaSet", rs["metadata"]["namespace"], rs["metadata"]["name"]), None)
