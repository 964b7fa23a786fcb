"""The object store: create, get, list, update (PUT and PATCH), delete; resourceVersions, generations,
preconditions (409), ``dryRun``. A write to a workload starts its controllers."""

from __future__ import annotations

import copy
import json
import uuid

from .controllers import Controllers, _hash10
from .defaults import apply_defaults, pod_template_of, validate
from .manifests import namespace
from .patch import _patched
from .resources import _BY_KIND, _WORKLOADS, ApiError, Obj, Resource, _not_found, _now, find_resource
from .selectors import _field_matches, parse_selector, selector_matches
from .state import ObjList


class Store(Controllers):
    """The objects, as the API server keeps them."""

    # -- Python API for tests and the local stack
    def create(self, obj: Obj) -> Obj:
        """Store a new object (defaults filled, namespace auto-created, rollout simulated)."""
        res = find_resource(str(obj.get("kind", "")))
        ns = str(obj.get("metadata", {}).get("namespace") or "default") if res.namespaced else ""
        with self._lock:
            if ns and ("Namespace", "", ns) not in self._objects:
                self._create(_BY_KIND["Namespace"], "", namespace(ns))
            return self._create(res, ns, copy.deepcopy(obj))

    def get(self, kind: str, namespace: str | None, name: str) -> Obj:
        """A copy of the stored object; raises ``KeyError`` if absent."""
        res = find_resource(kind)
        with self._lock:
            obj = self._objects.get((res.kind, (namespace or "") if res.namespaced else "", name))
            if obj is None:
                raise KeyError(f"{res.kind} {namespace}/{name} not found")
            return copy.deepcopy(obj)

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        res = find_resource(kind)
        with self._lock:
            return [
                copy.deepcopy(o)
                for (k, ns, _), o in sorted(self._objects.items())
                if k == res.kind and (namespace is None or ns == namespace)
            ]

    def patch(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        patch: Obj | ObjList,
        content_type: str | None = None,
    ) -> Obj:
        """Change an object as another writer would (bumps resourceVersion, rolls out on template change).
        Default content type: a strategic merge patch, a JSON merge patch for a custom resource."""
        res = find_resource(kind)
        if content_type is None:
            content_type = f"application/{'merge' if res.custom else 'strategic-merge'}-patch+json"
        ns = (namespace or "") if res.namespaced else ""
        with self._lock:
            current = self._objects.get((res.kind, ns, name))
            if current is None:
                raise KeyError(f"{res.kind} {namespace}/{name} not found")
            new = _patched(current, content_type, json.dumps(patch).encode(), res)
            return self._update(res, ns, name, new, "", dry_run=False)

    def promote_rollout(self, namespace: str, name: str) -> Obj:
        """Resume an Argo Rollout held at a pause step, as ``kubectl argo rollouts promote`` does: a
        merge patch of its status subresource that clears ``pauseConditions``."""
        res = find_resource("Rollout")
        with self._lock:
            current = self._objects.get((res.kind, namespace, name))
            if current is None:
                raise KeyError(f"Rollout {namespace}/{name} not found")
            body = json.dumps({"status": {"pauseConditions": None}}).encode()
            new = _patched(current, "application/merge-patch+json", body, res)
            return self._update(res, namespace, name, new, "status", dry_run=False)

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        res = find_resource(kind)
        with self._lock:
            self._delete(res, (namespace or "") if res.namespaced else "", name)

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    # -- internals (call with the lock held)
    def _create(self, res: Resource, ns: str, obj: Obj, dry_run: bool = False) -> Obj:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            self._seq += 1
            meta["name"] = meta["generateName"] + _hash10([meta["generateName"], self._seq])[:5]
        name = meta.get("name")
        if not name or not isinstance(name, str):
            raise ApiError(422, "metadata.name: Required value", "Invalid")
        if (res.kind, ns, name) in self._objects:
            raise ApiError(
                409,
                f'{res.qualified} "{name}" already exists',
                "AlreadyExists",
                {"name": name, "group": res.group, "kind": res.plural},
            )
        if ns and ("Namespace", "", ns) not in self._objects:
            raise ApiError(
                404, f'namespaces "{ns}" not found', "NotFound", {"name": ns, "kind": "namespaces"}
            )
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        for drop in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "managedFields"):
            meta.pop(drop, None)
        if ns:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        apply_defaults(obj)
        validate(obj, res)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        if res.kind in _WORKLOADS:
            meta["generation"] = 1
        if dry_run:
            meta["resourceVersion"] = str(self._rv)
            return copy.deepcopy(obj)
        meta["resourceVersion"] = self._next_rv()
        self._objects[(res.kind, ns, name)] = obj
        if res.kind == "Pod":
            self._pod_status(obj)
        if res.kind in _WORKLOADS:
            obj["status"] = self._initial_status(obj)
            self._rollout(obj, template_changed=True)
        return copy.deepcopy(obj)

    def _update(self, res: Resource, ns: str, name: str, new: Obj, subresource: str, dry_run: bool) -> Obj:
        """Shared tail of PUT and PATCH: preconditions, server-owned fields, generation, rollout."""
        old = self._objects.get((res.kind, ns, name))
        if old is None:
            raise _not_found(res, name)
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise ApiError(400, "metadata is required")
        if meta.get("name", name) != name:
            raise ApiError(
                400,
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})",
            )
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
                "Conflict",
                {"name": name, "group": res.group, "kind": res.plural},
            )
        if subresource == "status":
            new = {**copy.deepcopy(old), "status": new.get("status", old.get("status"))}
        elif "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        new["apiVersion"], new["kind"] = res.api_version, res.kind
        for keep in ("uid", "creationTimestamp", "generation", "namespace", "name"):
            if keep in old["metadata"]:
                new["metadata"][keep] = old["metadata"][keep]
        new["metadata"].pop("managedFields", None)
        apply_defaults(new)
        validate(new, res)
        spec_changed = new.get("spec") != old.get("spec")
        if spec_changed and "generation" in new["metadata"]:
            new["metadata"]["generation"] += 1
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return copy.deepcopy(old)  # no-op writes keep the resourceVersion, like the real server
        new["metadata"]["resourceVersion"] = str(self._rv) if dry_run else self._next_rv()
        if dry_run:
            return new
        self._objects[(res.kind, ns, name)] = new
        if res.kind == "Pod" and spec_changed and subresource != "status":
            self._pod_status(new)  # the kubelet restarts changed containers at once
        if res.kind in _WORKLOADS and spec_changed:
            tmpl_changed = pod_template_of(new) != pod_template_of(old)
            self._rollout(new, template_changed=tmpl_changed)
        if res.kind == "Rollout" and subresource == "status":
            paused = (old.get("status") or {}).get("pauseConditions")
            if paused and not (new.get("status") or {}).get("pauseConditions"):
                self._resume_rollout(new)  # promoted: the controller moves past the pause step
        return copy.deepcopy(new)

    def _delete(self, res: Resource, ns: str, name: str) -> Obj:
        obj = self._objects.pop((res.kind, ns, name), None)
        if obj is None:
            raise _not_found(res, name)
        key = (res.kind, ns, name)
        if timer := self._timers.pop(key, None):
            timer.cancel()
        for pod in self._owned.pop(key, []):
            self._objects.pop(pod, None)
        if res.kind == "Deployment":
            self._drop_replica_sets(obj)
        if res.kind == "Namespace":
            for k in [k for k in self._objects if k[1] == name]:
                self._objects.pop(k)
                self._owned.pop(k, None)
            obj["status"] = {"phase": "Terminating"}
        self._next_rv()
        return obj

    def _matching(self, res: Resource, ns: str | None, query: dict[str, str]) -> ObjList:
        reqs = parse_selector(query.get("labelSelector", ""))
        fields = query.get("fieldSelector", "")
        return [
            o
            for (kind, ons, _), o in sorted(self._objects.items())
            if kind == res.kind
            and (ns is None or ons == ns)
            and selector_matches(reqs, o["metadata"].get("labels") or {})
            and _field_matches(fields, o)
        ]
