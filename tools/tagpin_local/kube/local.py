"""One cluster of the local stack (:class:`LocalCluster`): a real control plane seen as tagpin and
the people around it see it.

- tagpin reaches it through a fault-injecting front (:mod:`.front`) as the ServiceAccount
  ``tagpin-system/tagpin``, bound to exactly docs/rbac.yaml (:mod:`.rbac`): :meth:`kubeconfig` is
  what the stack keeps in the cluster's secret. ``inject``, ``set_down``, ``count`` and
  ``requests`` are the front's.
- A person (the tests, ``kubectl`` in the README) is the cluster's admin, straight to the API
  server: :attr:`admin`, ``kubeconfig(identity=cluster.admin)``; objects by kind (``create``,
  ``get``, ``list``, ``patch``, ``delete``) go that way too, so they are not counted by the front.
- What a kubelet would do is kwok's (:mod:`.kubelet`): ``break_image``, ``repair_image``,
  ``set_image_id``, ``rollout_delay``; Argo Rollouts' controller is the stand-in of :mod:`.argo`
  (``promote_rollout``, ``abort_rollout``).
- :meth:`as_eks` makes it an EKS cluster: its API server then takes EKS tokens (:mod:`.eks`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes.client import ApiException

from . import rbac
from .access import Identity
from .cluster import KubeCluster
from .eks import AccessEntries
from .front import Fault, KubeFront, RequestRecord
from .manifests import namespace as namespace_manifest

type Obj = dict[str, Any]
type ObjList = list[Obj]  # ``list`` is a method of LocalCluster
type Requests = list[RequestRecord]


class LocalCluster:
    """``name``: the cluster's name in tagpin's configuration (and its kubeconfig context)."""

    def __init__(self, kube: KubeCluster, name: str) -> None:
        self.kube = kube
        self.name = name
        rbac.install(kube.api_client())
        self.tagpin: Identity = kube.service_account(rbac.NAMESPACE, rbac.ACCOUNT)
        self.front: KubeFront = kube.front()

    def close(self) -> None:
        """Stop the front (the control plane is its owner's to stop or reuse)."""
        self.kube.drop_front(self.front)

    # -- where and as whom
    @property
    def url(self) -> str:
        """Where tagpin reaches the cluster: the front."""
        return self.front.url

    @property
    def ca_pem(self) -> bytes:
        return self.kube.ca_pem

    @property
    def admin(self) -> Identity:
        return self.kube.admin

    @property
    def token(self) -> str | None:
        """tagpin's bearer token (its ServiceAccount's): the secret its kubeconfig holds."""
        return self.tagpin.token

    def kubeconfig(self, context: str | None = None, identity: Identity | None = None) -> Obj:
        """tagpin's kubeconfig (through the front), or ``identity``'s (straight to the API server),
        its context named ``context`` (the cluster's name by default)."""
        who = identity or self.tagpin
        server = self.front.url if who == self.tagpin else None
        return self.kube.kubeconfig(who, server=server, context=context or self.name)

    def write_kubeconfig(
        self, path: str | Path, context: str | None = None, identity: Identity | None = None
    ) -> Path:
        out = Path(path)
        out.write_text(json.dumps(self.kubeconfig(context, identity), indent=2))
        out.chmod(0o600)
        return out

    def as_eks(self, cluster: str, sts_endpoint: str, groups: dict[str, tuple[str, ...]]) -> None:
        """The EKS cluster ``cluster``: EKS tokens signed by moto's STS (``sts_endpoint``) are
        taken for the principal ARNs of ``groups`` (its access entries), with those groups."""
        self.kube.eks.configure(AccessEntries(cluster, sts_endpoint, dict(groups)))

    @property
    def ca_data(self) -> str:
        return base64.b64encode(self.ca_pem).decode()

    # -- objects, as the admin
    def create(self, obj: Obj) -> Obj:
        """Create ``obj`` (its namespace too, when missing: a convenience kubectl does not offer)."""
        ns = (obj.get("metadata") or {}).get("namespace")
        if ns and obj.get("kind") != "Namespace":
            try:
                self.kube.objects.create(namespace_manifest(ns))
            except ApiException as exc:
                if exc.status != 409:
                    raise
        return self.kube.objects.create(obj)

    def get(self, kind: str, namespace: str | None, name: str) -> Obj:
        return self.kube.objects.get(kind, namespace, name)

    def list(self, kind: str, namespace: str | None = None) -> ObjList:
        return self.kube.objects.list(kind, namespace)

    def patch(
        self, kind: str, namespace: str | None, name: str, patch: Any, content_type: str | None = None
    ) -> Obj:
        return self.kube.objects.patch(kind, namespace, name, patch, content_type)

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        self.kube.objects.delete(kind, namespace, name)

    def watch(
        self, kind: str, namespace: str | None, name: str, since: str, timeout: int = 10
    ) -> Iterator[Obj]:
        """Each state of the object written after resourceVersion ``since`` (:meth:`.Objects.watch`)."""
        return self.kube.objects.watch(kind, namespace, name, since, timeout)

    def pods_for(self, kind: str, namespace: str, name: str) -> ObjList:
        """The pods of a workload (through its ReplicaSets for a Deployment or a Rollout), those
        not being deleted, by name."""
        owner = self.get(kind, namespace, name)["metadata"]["uid"]
        owners = {owner}
        if kind in ("Deployment", "Rollout"):
            owners = {
                rs["metadata"]["uid"]
                for rs in self.list("ReplicaSet", namespace)
                if any(o.get("uid") == owner for o in rs["metadata"].get("ownerReferences") or [])
            }
        found = [
            p
            for p in self.list("Pod", namespace)
            if not p["metadata"].get("deletionTimestamp")
            and any(o.get("uid") in owners for o in p["metadata"].get("ownerReferences") or [])
        ]
        return sorted(found, key=lambda p: str(p["metadata"]["name"]))

    # -- the kubelets (kwok) and Argo Rollouts (the stand-in)
    def add_node(self, name: str, platform: str = "linux/amd64") -> None:
        """Another node (kwok's), reporting ``platform`` (``os/architecture``); Ready on return."""
        self.kube.add_node(name, platform)

    def break_image(self, text: str) -> None:
        """Pods with ``text`` in an image (a digest, a reference) never become Ready."""
        self.kube.kubelet.break_image(text)

    def repair_image(self, text: str) -> None:
        self.kube.kubelet.repair_image(text)

    def set_image_id(self, image: str, digest_or_image_id: str | None) -> None:
        """The imageID pods running the tag ``image`` report (what a kubelet resolved it to)."""
        self.kube.kubelet.set_image_id(image, digest_or_image_id)

    @property
    def rollout_delay(self) -> float:
        """Seconds before a started pod becomes Ready (so roughly per pod of a rollout)."""
        return self.kube.kubelet.ready_delay

    @rollout_delay.setter
    def rollout_delay(self, seconds: float) -> None:
        self.kube.kubelet.set_ready_delay(seconds)

    def promote_rollout(self, namespace: str, name: str) -> None:
        """``kubectl argo rollouts promote``: past the pause step the Rollout is held at."""
        self.kube.argo.promote(namespace, name)

    def abort_rollout(self, namespace: str, name: str) -> None:
        """``kubectl argo rollouts abort``: back to the stable ReplicaSet, Degraded."""
        self.kube.argo.abort(namespace, name)

    # -- tagpin's permissions (docs/rbac.yaml)
    def revoke(self, verb: str, resource: str, group: str | None = None) -> None:
        """Take one verb on one resource out of docs/rbac.yaml's roles (the authorizer refuses it
        once this returns)."""
        rbac.revoke(self.kube.api_client(), verb, resource, group)

    def restore_rbac(self) -> None:
        """docs/rbac.yaml as it stands, again."""
        rbac.install(self.kube.api_client())

    # -- the front's faults and request log
    def inject(self, method: str, path_regex: str, **fault: Any) -> Fault:
        return self.front.inject(method, path_regex, **fault)

    def clear_faults(self) -> None:
        self.front.clear_faults()

    def set_down(self, down: bool = True, mode: str = "close") -> None:
        self.front.set_down(down, mode)

    def count(self, method: str, path_regex: str = "") -> int:
        return self.front.count(method, path_regex)

    def clear_requests(self) -> None:
        self.front.clear_requests()

    @property
    def requests(self) -> Requests:
        return self.front.requests
