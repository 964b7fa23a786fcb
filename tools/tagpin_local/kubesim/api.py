"""The REST semantics of one request, as the HTTP handler hands it over.

The simulator speaks enough of the real API for the official ``kubernetes`` Python client and kubectl
1.32: legacy discovery (kubectl falls back to it from aggregated discovery; no OpenAPI is served),
server-side tables for kubectl's human output, GET/LIST (label and simple field selectors,
``limit``/``continue``), a polling WATCH, POST, PUT, PATCH (strategic merge, JSON merge, JSON
patch; apply patches get 415, and so does a strategic merge patch of a custom resource, as the real
server answers), DELETE, ``dryRun=All``, resourceVersion preconditions (409) and ``Status`` errors.
Resources: namespaces, pods, deployments, statefulsets, daemonsets, cronjobs, and Argo Rollouts'
``rollouts.argoproj.io`` (a custom resource: ``/apis/argoproj.io/v1alpha1``).
Every request is authorized (RBAC per token, allow-all by default: :mod:`.authz`), and the self
access and rules reviews are answered.
"""

from __future__ import annotations

import base64
import copy
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

from . import authz
from .authz import Authz
from .discovery import Discovery
from .patch import _patched
from .resources import _GROUPS, RESOURCES, ApiError, Obj, Resource, _not_found
from .state import ObjList
from .store import Store


class Api(Store, Discovery, Authz):
    """Serves requests: :meth:`handle` answers one, :meth:`watch_events` streams a watch."""

    # -- HTTP dispatch (called by the handler)
    def handle(self, req: Request) -> Obj:
        """Serve one authenticated request; raises :class:`ApiError` for error answers."""
        with self._lock:
            if req.method == "GET" and (disc := self._discovery([p for p in req.path.split("/") if p])):
                return disc
            if req.path.startswith(f"/apis/{authz.GROUP}/"):
                return self._review(req.token, req.method, req.path, req.ctype, req.body)
            res, ns, name, sub = _parse_path(req.path)
            self._authorize(
                req.token, authz.verb_of(req.method, name is not None, req.query), res, ns, name, sub
            )
            if name is None:
                return self._collection(req, res, ns)
            if res.namespaced and ns is None:
                raise ApiError(404, "the server could not find the requested resource")
            return self._item(req, res, ns or "", name, sub)

    def _collection(self, req: Request, res: Resource, ns: str | None) -> Obj:
        if req.method == "GET":
            return self._list(res, ns, req.query, req.accept)
        if req.method != "POST" or (ns is None and res.namespaced):
            raise ApiError(405, f"{req.method} is not supported here", "MethodNotAllowed")
        obj = _json_body(req.body, res, req.ctype)
        if res.namespaced and obj.get("metadata", {}).get("namespace") not in (None, "", ns):
            raise ApiError(
                400, "the namespace of the provided object does not match the namespace sent on the request"
            )
        return self._create(res, ns or "", obj, dry_run=req.dry_run) | {"__code__": 201}

    def _item(self, req: Request, res: Resource, ns: str, name: str, sub: str) -> Obj:
        current = self._objects.get((res.kind, ns, name))
        if current is None:
            raise _not_found(res, name)
        if req.method == "GET":
            return self._maybe_table([current], req.accept, single=True) or copy.deepcopy(current)
        if req.method == "PUT":
            return self._update(res, ns, name, _json_body(req.body, res, req.ctype), sub, req.dry_run)
        if req.method == "PATCH":
            return self._update(res, ns, name, _patched(current, req.ctype, req.body, res), sub, req.dry_run)
        if req.method != "DELETE":
            raise ApiError(405, f"{req.method} is not supported", "MethodNotAllowed")
        if req.dry_run:
            return copy.deepcopy(current)
        gone = self._delete(res, ns, name)
        if res.kind in ("Pod", "Namespace"):
            return gone
        details = {"name": name, "group": res.group, "kind": res.plural, "uid": gone["metadata"]["uid"]}
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def watch_events(self, req: Request) -> Iterator[Obj]:
        """Watch a collection: ADDED/MODIFIED/DELETED events, found by polling, until ``timeoutSeconds``
        (at most 5 minutes) pass or the simulator stops. Initial objects newer than ``resourceVersion``
        (all of them without one) come as ADDED. Bad paths and selectors raise before streaming."""
        res, ns, name, _ = _parse_path(req.path)
        if name is not None:
            raise ApiError(
                405, "watch a collection with fieldSelector=metadata.name=NAME", "MethodNotAllowed"
            )
        self._authorize(req.token, "watch", res, ns, None, "")
        with self._lock:
            self._matching(res, ns, req.query)
        since = int(req.query.get("resourceVersion") or 0)
        deadline = time.monotonic() + min(float(req.query.get("timeoutSeconds") or 300), 300)
        return self._watch(res, ns, req.query, since, deadline)

    def _watch(
        self, res: Resource, ns: str | None, query: dict[str, str], since: int, deadline: float
    ) -> Iterator[Obj]:
        known: dict[tuple[str, str], Obj] = {}
        first = True
        while time.monotonic() < deadline and not self._stopping.is_set():
            events: ObjList = []
            with self._lock:
                now = {
                    (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
                    for o in self._matching(res, ns, query)
                }
                for key, obj in now.items():
                    if key not in known:
                        if not first or int(obj["metadata"]["resourceVersion"]) > since:
                            events.append({"type": "ADDED", "object": copy.deepcopy(obj)})
                    elif known[key]["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                        events.append({"type": "MODIFIED", "object": copy.deepcopy(obj)})
                for key in known.keys() - now.keys():
                    gone = copy.deepcopy(known[key])
                    gone["metadata"]["resourceVersion"] = str(self._rv)
                    events.append({"type": "DELETED", "object": gone})
                known = {key: copy.deepcopy(obj) for key, obj in now.items()}
            first = False
            yield from events
            self._stopping.wait(0.05)

    def _list(self, res: Resource, ns: str | None, query: dict[str, str], accept: str) -> Obj:
        items = self._matching(res, ns, query)
        start = 0
        if token := query.get("continue"):
            try:
                after = json.loads(base64.urlsafe_b64decode(token.encode()))
                start = next(
                    (
                        i
                        for i, o in enumerate(items)
                        if [o["metadata"].get("namespace", ""), o["metadata"]["name"]] > after
                    ),
                    len(items),
                )
            except (ValueError, TypeError):
                raise ApiError(400, "continue key is not valid") from None
        limit = int(query.get("limit") or 0)
        page = items[start : start + limit] if limit > 0 else items[start:]
        meta: Obj = {"resourceVersion": str(self._rv)}
        if limit > 0 and start + limit < len(items):
            last = page[-1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps([last.get("namespace", ""), last["name"]]).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - start - limit
        table = self._maybe_table(page, accept, single=False)
        if table is not None:
            table["metadata"] = meta
            return table
        out = []
        for o in page:
            item = copy.deepcopy(o)
            item.pop("kind", None)  # the real server leaves kind/apiVersion off list items
            item.pop("apiVersion", None)
            out.append(item)
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": out}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    ctype: str | None
    body: bytes
    accept: str
    token: str | None = None  # the bearer token, for authorization

    @property
    def dry_run(self) -> bool:
        return self.query.get("dryRun") == "All"


def _parse_path(path: str) -> tuple[Resource, str | None, str | None, str]:
    """``/apis/apps/v1/namespaces/ns/deployments/web/status`` -> (resource, "ns", "web", "status")."""
    parts = [p for p in path.split("/") if p]
    missing = ApiError(404, "the server could not find the requested resource")
    if len(parts) >= 2 and parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis" and _GROUPS.get(parts[1]) == parts[2]:
        group, rest = parts[1], parts[3:]
    else:
        raise missing
    ns: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    res = next((r for r in RESOURCES if rest and r.plural == rest[0] and r.group == group), None)
    if res is None or len(rest) > 3 or (ns is not None and not res.namespaced):
        raise missing
    sub = rest[2] if len(rest) == 3 else ""
    if sub not in ("", "status"):
        raise missing
    return res, ns, rest[1] if len(rest) >= 2 else None, sub


def _json_body(body: bytes, res: Resource, ctype: str | None) -> Obj:
    if (ctype or "application/json").split(";")[0].strip().lower() != "application/json":
        raise ApiError(
            415,
            f"the body of the request was in an unknown format ({ctype}) - accepted media types include: "
            "application/json",
        )
    try:
        obj = json.loads(body or b"null")
    except ValueError as exc:
        raise ApiError(400, f"invalid JSON body: {exc}") from None
    if not isinstance(obj, dict):
        raise ApiError(400, "request body must be a JSON object")
    if obj.get("kind") not in (None, res.kind):
        raise ApiError(400, f"the kind {obj.get('kind')!r} does not match {res.kind!r}")
    return obj
