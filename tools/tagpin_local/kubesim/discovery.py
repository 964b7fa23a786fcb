"""What kubectl needs besides the resources: legacy discovery (kubectl falls back to it from aggregated
discovery; no OpenAPI is served) and server-side tables for its human output."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from . import authz
from .defaults import pod_template_of
from .resources import _GROUPS, RESOURCES, Obj
from .state import ObjList, State, StrList

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


class Discovery(State):
    """Discovery documents and ``as=Table`` answers."""

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
            elif o["kind"] == "ReplicaSet":
                state = f"{st.get('readyReplicas', 0)}/{o['spec'].get('replicas', 0)}"
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
        if (reviews := authz.discovery(parts)) is not None:
            return reviews
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
            gv = {"groupVersion": f"{authz.GROUP}/{authz.VERSION}", "version": authz.VERSION}
            groups.append({"name": authz.GROUP, "versions": [gv], "preferredVersion": gv})
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
                        # the built-in workloads are in kubectl's "all"; Argo's CRD declares no category
                        **({"categories": ["all"]} if r.kind != "Namespace" and not r.custom else {}),
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


def _age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    secs = int(time.time() - datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{max(secs, 0)}s"
