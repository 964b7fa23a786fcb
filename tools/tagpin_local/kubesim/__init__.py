"""A small in-process Kubernetes API simulator for tests and the local stack.

By concern: ``resources`` (served types, ``Status`` errors), ``manifests`` (minimal manifests),
``defaults`` (server-side defaults, validation), ``patch`` (strategic merge, JSON merge, JSON patch),
``selectors`` (label and field selectors), ``state`` (what the simulator holds), ``controllers``
(rollouts, Pods, imageIDs), ``store`` (the objects), ``discovery`` (discovery, kubectl's tables),
``api`` (the REST semantics of a request), ``authz`` (RBAC per token, access reviews), ``server``
(:class:`KubeSim`: HTTP server, faults) and ``tls`` (the server certificate).

Usage::

    with KubeSim(token="t0k3n") as sim:           # KubeSim(..., tls=True) for kubectl with a token
        sim.create(deployment("web", "shop", "nginx:1.27"))
        sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=sim.url, ...))
        ...
        sim.create(rollout("api", "shop", "nginx:1.27", steps=[{"setWeight": 20}, {"pause": {}}]))
        sim.promote_rollout("shop", "api")           # past an Argo Rollout's pause step
        sim.inject("PATCH", r"/deployments/web$", status=500, times=1)
        sim.set_down(True)
        sim.grant(rules_from_manifests(Path("docs/rbac.yaml").read_text()))  # RBAC (default: allow all)
        sim.revoke("patch", "deployments")                                   # now a PATCH is a 403

Only 127.0.0.1 is ever bound. Everything is held in memory; one lock guards the state.
"""

from .api import Request
from .authz import Rule, rules_from_manifests
from .controllers import fake_digest, image_repo
from .defaults import apply_defaults, pod_template_of, validate
from .discovery import SERVER_VERSION
from .manifests import cronjob, daemonset, deployment, namespace, node, rollout, statefulset
from .patch import MERGE_KEYS, json_patch, merge_patch, strategic_merge
from .resources import RESOURCES, ApiError, Obj, Resource, find_resource, status_object
from .selectors import Requirement, parse_selector, selector_matches
from .server import Fault, KubeSim, RequestRecord
from .state import Key, KeyList, ObjList, StrList

__all__ = [
    "MERGE_KEYS",
    "RESOURCES",
    "SERVER_VERSION",
    "ApiError",
    "Fault",
    "Key",
    "KeyList",
    "KubeSim",
    "Obj",
    "ObjList",
    "Request",
    "RequestRecord",
    "Requirement",
    "Resource",
    "Rule",
    "StrList",
    "apply_defaults",
    "cronjob",
    "daemonset",
    "deployment",
    "fake_digest",
    "find_resource",
    "image_repo",
    "json_patch",
    "merge_patch",
    "namespace",
    "node",
    "parse_selector",
    "pod_template_of",
    "rollout",
    "rules_from_manifests",
    "selector_matches",
    "statefulset",
    "status_object",
    "strategic_merge",
    "validate",
]
