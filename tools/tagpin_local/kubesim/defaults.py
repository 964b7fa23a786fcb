"""What the API server does to an object before storing it: fill defaults, validate."""

from __future__ import annotations

from .resources import _WORKLOADS, ApiError, Obj, Resource


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
