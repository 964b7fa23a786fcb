"""A small in-process Kubernetes API simulator for tests and the local stack.

It speaks enough of the real API for the official ``kubernetes`` Python client and kubectl 1.32:
legacy discovery (kubectl falls back to it from aggregated discovery; no OpenAPI is served),
server-side tables for kubectl's human output, GET/LIST (label and simple field selectors,
``limit``/``continue``), a polling WATCH, POST, PUT, PATCH (strategic merge, JSON merge, JSON
patch; apply patches get 415), DELETE, ``dryRun=All``, resourceVersion preconditions (409) and
``Status`` errors. Resources: namespaces, pods, deployments, statefulsets, daemonsets, cronjobs.

It also plays the controllers tagpin cares about: a new pod template "rolls out" (at once, or after
``rollout_delay``) into workload status and Pods whose ``imageID`` carries a digest.

Usage::

    with KubeSim(token="t0k3n") as sim:           # KubeSim(..., tls=True) for kubectl with a token
        sim.create(deployment("web", "shop", "nginx:1.27"))
        sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=sim.url, ...))
        ...
        sim.inject("PATCH", r"/deployments/web$", status=500, times=1)
        sim.set_down(True)

Only 127.0.0.1 is ever bound. Everything is held in memory; one lock guards the state.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Self
from urllib.parse import parse_qs, urlsplit

Obj = dict[str, Any]

SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-tagpin-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "CronJob")
_REVISION = "deployment.kubernetes.io/revision"


@dataclass(frozen=True)
class Resource:
    """One served resource type."""

    plural: str
    singular: str
    kind: str
    group: str  # "" for the core group
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``deployments.apps`` as used in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: tuple[Resource, ...] = (
    Resource("namespaces", "namespace", "Namespace", "", "v1", False, ("ns",)),
    Resource("pods", "pod", "Pod", "", "v1", True, ("po",)),
    Resource("deployments", "deployment", "Deployment", "apps", "v1", True, ("deploy",)),
    Resource("statefulsets", "statefulset", "StatefulSet", "apps", "v1", True, ("sts",)),
    Resource("daemonsets", "daemonset", "DaemonSet", "apps", "v1", True, ("ds",)),
    Resource("cronjobs", "cronjob", "CronJob", "batch", "v1", True, ("cj",)),
)
_BY_KIND = {r.kind: r for r in RESOURCES}
_GROUPS = {"apps": "v1", "batch": "v1"}

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def find_resource(kind: str) -> Resource:
    """Resolve ``Deployment`` / ``deployment`` / ``deployments`` / ``deploy`` to a :class:`Resource`."""
    low = kind.lower()
    for r in RESOURCES:
        if low in (r.kind.lower(), r.plural, r.singular, *r.short_names):
            return r
    raise KeyError(f"kubesim does not serve kind {kind!r}")


class ApiError(Exception):
    """Raised inside the simulator; rendered as a ``Status`` object."""

    def __init__(
        self, code: int, message: str, reason: str | None = None, details: Obj | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.message = message
        self.details = details

    def status(self) -> Obj:
        return status_object(self.code, self.message, self.reason, self.details)


def status_object(code: int, message: str, reason: str | None = None, details: Obj | None = None) -> Obj:
    out: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason or _REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details is not None:
        out["details"] = details
    return out


def _not_found(res: Resource, name: str) -> ApiError:
    return ApiError(
        404,
        f'{res.qualified} "{name}" not found',
        "NotFound",
        {"name": name, "group": res.group, "kind": res.plural},
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------------------- manifest helpers


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


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


# ----------------------------------------------------------------------------- defaults


def pod_template_of(obj: Obj) -> Obj | None:
    """The pod template of a workload (``spec.template`` or the CronJob's job template)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        tmpl = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
    else:
        tmpl = spec.get("template")
    return tmpl if isinstance(tmpl, dict) else None


def _pull_policy(image: str) -> str:
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _default_container(c: Obj) -> None:
    c.setdefault("imagePullPolicy", _pull_policy(str(c.get("image", ""))))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for port in c.get("ports") or []:
        port.setdefault("protocol", "TCP")


def _default_pod_spec(spec: Obj, restart_policy: str = "Always") -> None:
    spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if isinstance(c, dict):
            _default_container(c)


def _default_template(tmpl: Obj, restart_policy: str = "Always") -> None:
    meta = tmpl.setdefault("metadata", {})
    meta.setdefault("creationTimestamp", None)
    _default_pod_spec(tmpl.setdefault("spec", {}), restart_policy)


def apply_defaults(obj: Obj) -> None:
    """Fill the defaults the real API server fills (in place)."""
    kind = obj.get("kind")
    spec: Obj = obj.setdefault("spec", {}) if kind != "Namespace" else {}
    if kind == "Deployment":
        spec.setdefault("replicas", 1)
        spec.setdefault("strategy", {"type": "RollingUpdate"})
        if spec["strategy"].get("type") == "RollingUpdate":
            spec["strategy"].setdefault("rollingUpdate", {"maxUnavailable": "25%", "maxSurge": "25%"})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    elif kind == "StatefulSet":
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if spec["updateStrategy"].get("type") == "RollingUpdate":
            spec["updateStrategy"].setdefault("rollingUpdate", {"partition": 0})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault(
            "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
        )
    elif kind == "DaemonSet":
        spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if spec["updateStrategy"].get("type") == "RollingUpdate":
            spec["updateStrategy"].setdefault("rollingUpdate", {"maxUnavailable": 1, "maxSurge": 0})
        spec.setdefault("revisionHistoryLimit", 10)
    elif kind == "CronJob":
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        jt = spec.setdefault("jobTemplate", {})
        jt.setdefault("metadata", {"creationTimestamp": None})
        jt.setdefault("spec", {}).setdefault("template", {})
    elif kind == "Pod":
        _default_pod_spec(spec)
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("nodeName", "sim-node-1")
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("priority", 0)
    elif kind == "Namespace":
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj.setdefault("status", {"phase": "Active"})
        name = obj.get("metadata", {}).get("name", "")
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    if kind in ("Deployment", "StatefulSet", "DaemonSet"):
        _default_template(spec.setdefault("template", {}))
    elif kind == "CronJob":
        _default_template(spec["jobTemplate"]["spec"]["template"], "OnFailure")


def validate(obj: Obj, res: Resource) -> None:
    """The few validation rules that keep simulated objects deserialisable."""
    name = obj.get("metadata", {}).get("name") or ""
    causes: list[Obj] = []

    def bad(fld: str, msg: str) -> None:
        causes.append({"reason": "FieldValueRequired", "message": msg, "field": fld})

    if res.kind in _WORKLOADS:
        tmpl = pod_template_of(obj)
        containers = ((tmpl or {}).get("spec") or {}).get("containers")
        if not containers:
            bad("spec.template.spec.containers", "Required value")
        for i, c in enumerate(containers or []):
            if not isinstance(c, dict) or not c.get("name") or not c.get("image"):
                bad(f"spec.template.spec.containers[{i}]", "name and image are required")
    if res.kind in ("Deployment", "StatefulSet", "DaemonSet"):
        sel = (obj["spec"].get("selector") or {}).get("matchLabels")
        labels = ((pod_template_of(obj) or {}).get("metadata") or {}).get("labels") or {}
        if not sel:
            bad("spec.selector", "Required value")
        elif any(labels.get(k) != v for k, v in sel.items()):
            bad("spec.template.metadata.labels", "`selector` does not match template `labels`")
    if res.kind == "CronJob" and not obj["spec"].get("schedule"):
        bad("spec.schedule", "Required value")
    if res.kind == "Pod" and not (obj.get("spec") or {}).get("containers"):
        bad("spec.containers", "Required value")
    if causes:
        raise ApiError(
            422,
            f'{res.kind} "{name}" is invalid: {causes[0]["field"]}: {causes[0]["message"]}',
            "Invalid",
            {"name": name, "group": res.group, "kind": res.kind, "causes": causes},
        )


# ----------------------------------------------------------------------------- patches

# Patch merge keys of the lists tagpin's workloads contain (k8s.io/api struct tags).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "ownerReferences": "uid",
    "resourceClaims": "name",
}
_SET_LISTS = {"finalizers"}  # primitive lists with patchStrategy=merge


def _strip(value: Any) -> Any:
    """A patch value added where nothing existed: drop directives and nulls."""
    if isinstance(value, dict):
        return strategic_merge({}, value)
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and v.get("$patch") == "delete")]
    return copy.deepcopy(value)


def _merge_list(key: str, orig: list[Any], patch: list[Any]) -> list[Any]:
    mkey = MERGE_KEYS.get(key)
    if key in _SET_LISTS and all(not isinstance(p, dict | list) for p in patch):
        return copy.deepcopy(orig) + [p for p in patch if p not in orig]
    if mkey is None or not all(isinstance(p, dict) for p in patch):
        return _strip(patch)  # type: ignore[no-any-return]
    if any(p.get("$patch") == "replace" for p in patch):
        return [_strip(p) for p in patch if p.get("$patch") != "replace"]
    result = [copy.deepcopy(o) for o in orig]
    for item in patch:
        if mkey not in item:
            raise ApiError(400, f"map in list {key} is missing its merge key {mkey!r}")
        idx = next(
            (i for i, o in enumerate(result) if isinstance(o, dict) and o.get(mkey) == item[mkey]), None
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                del result[idx]
        elif idx is None:
            result.append(_strip(item))
        else:
            result[idx] = strategic_merge(result[idx], item)
    return result


def strategic_merge(orig: Any, patch: Any) -> Any:
    """Apply a Kubernetes strategic merge patch (the subset pod templates need)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if k != "$patch"})
    if directive == "delete":
        return None
    if directive is not None:
        raise ApiError(400, f"unknown patch directive {directive!r}")
    result: Obj = copy.deepcopy(orig) if isinstance(orig, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            fld = key.split("/", 1)[1]
            if isinstance(result.get(fld), list):
                result[fld] = [v for v in result[fld] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            cur = result.get(key)
            result[key] = _merge_list(key, cur if isinstance(cur, list) else [], value)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: Obj = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            raise ApiError(422, f"path /{'/'.join(parts)} does not exist")
    return doc


def _json_add(doc: Any, parts: list[str], value: Any, replace: bool = False) -> Any:
    if not parts:
        return copy.deepcopy(value)
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise ApiError(422, f"replace target {last!r} does not exist")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = copy.deepcopy(value)
            else:
                parent.insert(int(last), copy.deepcopy(value))
        else:
            raise ApiError(422, f"invalid array index {last!r}")
    else:
        raise ApiError(422, "add target is not a container")
    return doc


def _json_remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise ApiError(422, "cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise ApiError(422, f"remove target /{'/'.join(parts)} does not exist")


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, f"invalid json patch operation {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ApiError(400, f"json patch {kind} needs a value")
        if kind == "add":
            doc = _json_add(doc, parts, op["value"])
        elif kind == "replace":
            doc = _json_add(doc, parts, op["value"], replace=True)
        elif kind == "remove":
            _json_remove(doc, parts)
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = _json_remove(doc, src) if kind == "move" else copy.deepcopy(_walk(doc, src))
            doc = _json_add(doc, parts, value)
        elif kind == "test":
            if _walk(doc, parts) != op["value"]:
                raise ApiError(422, f"testing value {op['path']} failed: test failed")
        else:
            raise ApiError(400, f"unknown json patch op {kind!r}")
    return doc


# ----------------------------------------------------------------------------- label selectors

_SET_RE = re.compile(r"^\s*([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([\w./-]+)\s*(==|!=|=)\s*([\w./-]*)\s*$")
_KEY_RE = re.compile(r"^\s*(!?)\s*([\w./-]+)\s*$")


Requirement = tuple[str, str, frozenset[str]]  # (key, op, values); op in = != in notin exists !


def parse_selector(text: str) -> list[Requirement]:
    """Parse a label selector (``a=b,c!=d,e,!f,g in (x,y),h notin (z)``); ``ApiError`` 400 if malformed."""
    terms, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    reqs: list[Requirement] = []
    for term in (t for t in terms if t.strip()):
        if m := _SET_RE.match(term):
            reqs.append((m.group(1), m.group(2), frozenset(v.strip() for v in m.group(3).split(","))))
        elif m := _EQ_RE.match(term):
            reqs.append((m.group(1), "!=" if m.group(2) == "!=" else "=", frozenset([m.group(3)])))
        elif m := _KEY_RE.match(term):
            reqs.append((m.group(2), "!" if m.group(1) else "exists", frozenset()))
        else:
            raise ApiError(400, f"unable to parse requirement: {term.strip()!r}")
    return reqs


def selector_matches(reqs: list[Requirement], labels: dict[str, str]) -> bool:
    for key, op, values in reqs:
        value = labels.get(key)
        ok = {
            "=": value in values,
            "in": value in values,
            "!=": value not in values,
            "notin": value not in values,
            "exists": key in labels,
            "!": key not in labels,
        }[op]
        if not ok:
            return False
    return True


_FIELDS = ("metadata.name", "metadata.namespace", "status.phase", "spec.nodeName")


def _field_matches(text: str, obj: Obj) -> bool:
    for term in (t for t in text.split(",") if t.strip()):
        m = _EQ_RE.match(term)
        if not m or m.group(1) not in _FIELDS:
            raise ApiError(400, f"field label not supported: {term.strip()}")
        top, sub = m.group(1).split(".")
        actual = (obj.get(top) or {}).get(sub, "")
        if (actual == m.group(3)) != (m.group(2) != "!="):
            return False
    return True


# ----------------------------------------------------------------------------- the simulator


def _self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 (``cryptography`` if present, else openssl)."""
    cert, key = folder / "ca.crt", folder / "tls.key"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=kubesim",
                "-addext",
                "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ],
            check=True,
            capture_output=True,
        )
        return cert, key
    import ipaddress
    from datetime import timedelta

    pkey = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubesim")])
    now = datetime.now(UTC)
    san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    crt = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(pkey.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, False, False, False), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(pkey.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(pkey.public_key()), critical=False)
        .sign(pkey, hashes.SHA256())
    )
    cert.write_bytes(crt.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        pkey.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert, key


class RequestRecord(NamedTuple):
    method: str
    path: str  # without the query string
    content_type: str | None


@dataclass
class Fault:
    """An injected failure; see :meth:`KubeSim.inject`."""

    method: str
    pattern: re.Pattern[str]
    status: int | None
    times: int | None
    delay: float
    drop: bool
    action: Callable[[], object] | None = None
    hits: int = 0


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


Key = tuple[str, str, str]  # (kind, namespace, name); namespace "" for cluster-scoped kinds
# ``KubeSim.list`` shadows the builtin inside the class body, hence these aliases.
ObjList = list[Obj]
KeyList = list[Key]
StrList = list[str]


class KubeSim:
    """The simulator. Thread-safe; every public method may be called while the server runs.

    Knobs (plain attributes): ``image_id_for`` (``image -> digest | imageID | None``),
    ``rollout_delay`` (seconds before a rollout completes; 0 = in the same write),
    ``fail_rollouts`` (rollouts end with Progressing=False/ProgressDeadlineExceeded and old Pods stay),
    ``broken`` (digests or image references: a pod template with a container image that contains one
    of them never becomes available: the same failure, for that image only; see :meth:`break_image`),
    ``nodes`` (DaemonSet Pods per DaemonSet).
    """

    def __init__(self, token: str | None = None, rollout_delay: float = 0.0, tls: bool = False) -> None:
        self.token = token
        self.tls = tls
        self.ca_file: Path | None = None  # the self-signed server certificate when ``tls=True``...
        self.ca_pem: bytes | None = None  # ...and its PEM text
        self.rollout_delay = rollout_delay
        self.fail_rollouts = False
        self.broken: set[str] = set()
        self.nodes = 1
        self.image_id_for: Callable[[str], str | None] | None = None
        self.requests: list[RequestRecord] = []
        self._lock = threading.RLock()
        self._objects: dict[Key, Obj] = {}
        self._owned: dict[Key, list[Key]] = {}
        self._timers: dict[Key, threading.Timer] = {}
        self._faults: list[Fault] = []
        self._stopping = threading.Event()
        self._down: str | None = None
        self._rv = 0
        self._seq = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.create(namespace("default"))

    # -- lifecycle
    def start(self) -> Self:
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.sim = self
        if self.tls:
            self._tmp = tempfile.TemporaryDirectory(prefix="kubesim-")
            self.ca_file, key = _self_signed_cert(Path(self._tmp.name))
            self.ca_pem = self.ca_file.read_bytes()
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.ca_file, key)
            # the handshake then happens in the handler thread, not in the accept loop
            server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            for t in self._timers.values():
                t.cancel()
            self._timers.clear()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("KubeSim is not started")
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def kubeconfig(self, context: str = "sim", namespace: str = "default") -> Obj:
        """A kubeconfig for this server. kubectl (client-go) sends the token only over TLS: start the
        simulator with ``tls=True`` for kubectl to authenticate; the Python client sends it over http."""
        user: Obj = {"token": self.token} if self.token else {}
        cluster: Obj = {"server": self.url}
        if self.ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": user}],
            "contexts": [
                {"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}
            ],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, context: str = "sim") -> Path:
        """Write the kubeconfig as JSON (valid YAML for kubectl and ``load_kube_config``)."""
        out = Path(path)
        out.write_text(json.dumps(self.kubeconfig(context), indent=2))
        return out

    # -- faults
    def inject(
        self,
        method: str,
        path_regex: str,
        *,
        status: int | None = 500,
        times: int | None = 1,
        delay: float = 0.0,
        drop: bool = False,
        action: Callable[[], object] | None = None,
    ) -> Fault:
        """Fail matching requests: ``method`` is an HTTP verb or ``*``; ``path_regex`` is searched in the
        path (no query). ``status=None`` lets the request through (after ``delay`` and ``action``, e.g.
        a concurrent ``sim.patch`` that makes this request's resourceVersion stale); ``drop=True``
        closes the connection without an answer; ``times=None`` means forever. Faults are matched in
        the order they were added. Returns the :class:`Fault` (see ``.hits``)."""
        fault = Fault(method.upper(), re.compile(path_regex), status, times, delay, drop, action)
        with self._lock:
            self._faults.append(fault)
        return fault

    def break_image(self, digest_or_image: str) -> None:
        """Pods of this digest (or image reference) never become available: every rollout to it
        fails (Deployment: Progressing=False/ProgressDeadlineExceeded; StatefulSet and DaemonSet:
        the update never progresses) and the old Pods stay."""
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

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._down = None

    def set_down(self, down: bool = True, mode: str = "close") -> None:
        """Every request fails: ``mode="close"`` drops the connection, ``"503"`` answers 503."""
        if mode not in ("close", "503"):
            raise ValueError("mode must be 'close' or '503'")
        with self._lock:
            self._down = mode if down else None

    def count(self, method: str, path_regex: str = "") -> int:
        """How many logged requests match ``method`` (or ``*``) and ``path_regex``."""
        pat = re.compile(path_regex)
        with self._lock:
            return sum(
                1 for r in self.requests if method in ("*", r.method) and pat.search(r.path) is not None
            )

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

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
        content_type: str = "application/strategic-merge-patch+json",
    ) -> Obj:
        """Change an object as another writer would (bumps resourceVersion, rolls out on template change)."""
        res = find_resource(kind)
        ns = (namespace or "") if res.namespaced else ""
        with self._lock:
            current = self._objects.get((res.kind, ns, name))
            if current is None:
                raise KeyError(f"{res.kind} {namespace}/{name} not found")
            new = self._patched(current, content_type, json.dumps(patch).encode())
            return self._update(res, ns, name, new, "", dry_run=False)

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        res = find_resource(kind)
        with self._lock:
            self._delete(res, (namespace or "") if res.namespaced else "", name)

    def pods_for(self, kind: str, namespace: str, name: str) -> ObjList:
        """The Pods the simulated controller made for a workload."""
        key = (find_resource(kind).kind, namespace, name)
        with self._lock:
            return [copy.deepcopy(self._objects[k]) for k in self._owned.get(key, []) if k in self._objects]

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    # -- internals (call with the lock held)
    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

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
        if res.kind == "Namespace":
            for k in [k for k in self._objects if k[1] == name]:
                self._objects.pop(k)
                self._owned.pop(k, None)
            obj["status"] = {"phase": "Terminating"}
        self._next_rv()
        return obj

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
        if obj["kind"] == "Deployment" and template_changed:  # a new ReplicaSet, a new revision
            notes = obj["metadata"].setdefault("annotations", {})
            notes[_REVISION] = str(int(notes.get(_REVISION, "0")) + 1)
        if self.rollout_delay <= 0 or not template_changed:
            self._finish_rollout(obj)
            return
        self._progressing_status(obj)
        gen = obj["metadata"]["generation"]
        timer = threading.Timer(self.rollout_delay, self._finish_later, args=(key, gen))
        timer.daemon = True
        self._timers[key] = timer
        timer.start()

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
        if kind == "Deployment":
            pod_name = f"{name}-{thash}-{_hash10([name, self._seq])[:5]}"
            meta["generateName"] = f"{name}-{thash}-"
            labels["pod-template-hash"] = thash
            owner: Obj = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-{thash}"}
            owner["uid"] = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{ns}/{name}-{thash}"))
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
        rev = thash if kind == "Deployment" else f"{name}-{thash}"
        hash_label = "pod-template-hash" if kind == "Deployment" else "controller-revision-hash"
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
        elif kind == "DaemonSet":
            st.clear()
            st.update(currentNumberScheduled=want, desiredNumberScheduled=want, numberMisscheduled=0)
            st.update(
                numberReady=want, numberAvailable=want, updatedNumberScheduled=want, observedGeneration=gen
            )

    # -- HTTP dispatch (called by the handler)
    def handle(self, req: Request) -> Obj:
        """Serve one authenticated request; raises :class:`ApiError` for error answers."""
        with self._lock:
            if req.method == "GET" and (disc := self._discovery([p for p in req.path.split("/") if p])):
                return disc
            res, ns, name, sub = _parse_path(req.path)
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
            return self._update(res, ns, name, self._patched(current, req.ctype, req.body), sub, req.dry_run)
        if req.method != "DELETE":
            raise ApiError(405, f"{req.method} is not supported", "MethodNotAllowed")
        if req.dry_run:
            return copy.deepcopy(current)
        gone = self._delete(res, ns, name)
        if res.kind in ("Pod", "Namespace"):
            return gone
        details = {"name": name, "group": res.group, "kind": res.plural, "uid": gone["metadata"]["uid"]}
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _patched(self, current: Obj, ctype: str | None, body: bytes) -> Obj:
        mt = (ctype or "").split(";")[0].strip().lower()
        try:
            patch = json.loads(body or b"null")
        except ValueError as exc:
            raise ApiError(400, f"invalid JSON in patch body: {exc}") from None
        if mt == "application/strategic-merge-patch+json":
            if not isinstance(patch, dict):
                raise ApiError(400, "strategic merge patch must be a JSON object")
            result = strategic_merge(current, patch)
        elif mt == "application/merge-patch+json":
            result = merge_patch(current, patch)
        elif mt == "application/json-patch+json":
            result = json_patch(current, patch)
        else:
            raise ApiError(
                415,
                f"the body of the request was in an unknown format - accepted media types include: "
                f"application/json-patch+json, application/merge-patch+json, "
                f"application/strategic-merge-patch+json (got {mt or 'none'})",
            )
        if not isinstance(result, dict):
            raise ApiError(422, "patch did not produce an object")
        return result

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

    def watch_events(self, req: Request) -> Iterator[Obj]:
        """Watch a collection: ADDED/MODIFIED/DELETED events, found by polling, until ``timeoutSeconds``
        (at most 5 minutes) pass or the simulator stops. Initial objects newer than ``resourceVersion``
        (all of them without one) come as ADDED. Bad paths and selectors raise before streaming."""
        res, ns, name, _ = _parse_path(req.path)
        if name is not None:
            raise ApiError(
                405, "watch a collection with fieldSelector=metadata.name=NAME", "MethodNotAllowed"
            )
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

    def _maybe_table(self, objs: ObjList, accept: str, single: bool) -> Obj | None:
        """kubectl's human output asks for ``as=Table``; answer with a minimal server-side table."""
        if "as=Table" not in accept:
            return None
        cols = [("Name", "name"), ("Status", "string"), ("Age", "string")]
        rows = []
        for o in objs:
            st = o.get("status") or {}
            if o["kind"] in ("Deployment", "StatefulSet"):
                want = o["spec"].get("replicas", 1)
                state = f"{st.get('readyReplicas', 0)}/{want}"
                cols[1] = ("Ready", "string")
            elif o["kind"] == "DaemonSet":
                state = f"{st.get('numberReady', 0)}/{st.get('desiredNumberScheduled', 0)}"
                cols[1] = ("Ready", "string")
            elif o["kind"] == "CronJob":
                state = o["spec"].get("schedule", "")
                cols[1] = ("Schedule", "string")
            else:
                state = st.get("phase", "")
            images = ",".join(
                c.get("image", "")
                for c in ((pod_template_of(o) or o).get("spec") or {}).get("containers", [])
            )
            meta = {k: v for k, v in o["metadata"].items() if k != "managedFields"}
            rows.append(
                {
                    "cells": [
                        o["metadata"]["name"],
                        state,
                        _age(o["metadata"].get("creationTimestamp")),
                        images,
                    ],
                    "object": {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": meta,
                    },
                }
            )
        defs = [{"name": n, "type": "string", "format": f, "description": n, "priority": 0} for n, f in cols]
        defs.append(
            {"name": "Images", "type": "string", "format": "", "description": "Images", "priority": 1}
        )
        table: Obj = {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {},
            "columnDefinitions": defs,
        }
        table["rows"] = rows
        if single:
            table["metadata"] = {"resourceVersion": objs[0]["metadata"]["resourceVersion"]}
        return table

    def _discovery(self, parts: StrList) -> Obj | None:
        if parts == ["version"]:
            return dict(SERVER_VERSION)
        if parts == ["api"]:
            port = self._server.server_address[1] if self._server else 0
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{port}"}
                ],
            }
        if parts == ["apis"]:
            groups = []
            for g, v in _GROUPS.items():
                gv = {"groupVersion": f"{g}/{v}", "version": v}
                groups.append({"name": g, "versions": [gv], "preferredVersion": gv})
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        if parts in (["api", "v1"], *(["apis", g, v] for g, v in _GROUPS.items())):
            group = "" if parts[0] == "api" else parts[1]
            resources = []
            for r in RESOURCES:
                if r.group != group:
                    continue
                resources.append(
                    {
                        "name": r.plural,
                        "singularName": r.singular,
                        "namespaced": r.namespaced,
                        "kind": r.kind,
                        "verbs": _VERBS,
                        "shortNames": list(r.short_names),
                        **({"categories": ["all"]} if r.kind != "Namespace" else {}),
                    }
                )
                status_verbs = ["get", "patch", "update"]
                resources.append(
                    {
                        "name": f"{r.plural}/status",
                        "singularName": "",
                        "namespaced": r.namespaced,
                        "kind": r.kind,
                        "verbs": status_verbs,
                    }
                )
            group_version = f"{group}/{_GROUPS[group]}" if group else "v1"
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": group_version,
                "resources": resources,
            }
        return None


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    ctype: str | None
    body: bytes
    accept: str

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


def _age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    secs = int(time.time() - datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{max(secs, 0)}s"


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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    sim: KubeSim

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, dropped faults, TLS probes) are not errors worth printing."""
        if isinstance(sys.exc_info()[1], ConnectionError | ssl.SSLError | TimeoutError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubesim/1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _sim(self) -> KubeSim:
        assert isinstance(self.server, _Server)
        return self.server.sim

    def _send(self, code: int, payload: Obj, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: Iterator[Obj]) -> None:
        """A chunked stream of JSON lines, as the API server sends watch events."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _drop(self) -> None:
        self.close_connection = True
        self.wfile.flush()

    def _serve(self) -> None:
        sim = self._sim()
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        ctype = self.headers.get("Content-Type")
        method = self.command
        with sim._lock:
            sim.requests.append(RequestRecord(method, path, ctype))
            down = sim._down
            fault = next(
                (f for f in sim._faults if f.method in ("*", method) and f.pattern.search(path)), None
            )
            if fault is not None:
                fault.hits += 1
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        sim._faults.remove(fault)
        if down == "close":
            return self._drop()
        if down == "503":
            return self._send(503, status_object(503, "the cluster is down (kubesim)"))
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            if fault.action is not None:
                fault.action()
            if fault.drop:
                return self._drop()
            if fault.status is not None:
                headers = {"Retry-After": "1"} if fault.status in (429, 503) else None
                return self._send(fault.status, status_object(fault.status, "injected by kubesim"), headers)
        if sim.token is not None and self.headers.get("Authorization") != f"Bearer {sim.token}":
            return self._send(401, status_object(401, "Unauthorized"))
        req = Request(method, path, query, ctype, body, self.headers.get("Accept") or "")
        try:
            if method == "GET" and query.get("watch") in ("true", "1"):
                return self._stream(sim.watch_events(req))
            result = sim.handle(req)
        except ApiError as err:
            return self._send(err.code, err.status())
        except Exception as exc:  # a simulator bug must still answer
            return self._send(500, status_object(500, f"kubesim internal error: {exc!r}"))
        code = int(result.pop("__code__", 200))
        self._send(code, result)
        return None

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
