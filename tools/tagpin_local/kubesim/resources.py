"""The served resource types, ``Status`` errors and the small helpers every layer shares."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]

_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "CronJob", "Rollout")


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
    custom: bool = False  # served from a CustomResourceDefinition (no strategic merge patch)

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
    Resource("nodes", "node", "Node", "", "v1", False, ("no",)),
    Resource("deployments", "deployment", "Deployment", "apps", "v1", True, ("deploy",)),
    Resource("statefulsets", "statefulset", "StatefulSet", "apps", "v1", True, ("sts",)),
    Resource("daemonsets", "daemonset", "DaemonSet", "apps", "v1", True, ("ds",)),
    Resource("replicasets", "replicaset", "ReplicaSet", "apps", "v1", True, ("rs",)),
    Resource("cronjobs", "cronjob", "CronJob", "batch", "v1", True, ("cj",)),
    # Argo Rollouts, as its CRD declares it (names, short name, status subresource)
    Resource("rollouts", "rollout", "Rollout", "argoproj.io", "v1alpha1", True, ("ro",), custom=True),
)
_BY_KIND = {r.kind: r for r in RESOURCES}
_GROUPS = {"apps": "v1", "batch": "v1", "argoproj.io": "v1alpha1"}

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
