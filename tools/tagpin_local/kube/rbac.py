"""tagpin's identity in a local cluster, bound to exactly docs/rbac.yaml, and what tests take from it.

:func:`install` applies docs/rbac.yaml as it stands (its ClusterRoles and ClusterRoleBindings: the
groups ``tagpin-consumer`` and ``tagpin-reconciler`` and the ServiceAccount
``tagpin-system/tagpin``). The real RBAC authorizer then answers every request tagpin makes, and
its access reviews. :func:`revoke` takes one verb on one resource out of those roles, as a cluster
administrator who edits them would, and waits until the authorizer refuses it; :func:`install`
again puts the file back.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes import client
from kubernetes.client import ApiException

RBAC_FILE = Path(__file__).resolve().parents[3] / "docs" / "rbac.yaml"
NAMESPACE, ACCOUNT = "tagpin-system", "tagpin"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"

type Obj = dict[str, Any]


def documents() -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(RBAC_FILE.read_text()) if isinstance(doc, dict)]


PLURALS = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}
GROUP, VERSION = "rbac.authorization.k8s.io", "v1"


def install(api: client.ApiClient) -> None:
    """Create or replace every object of docs/rbac.yaml; returns once the authorizer allows every
    rule of its ClusterRoles to tagpin."""
    objects = client.CustomObjectsApi(api)
    changed = False
    for doc in documents():
        plural, name = PLURALS[doc["kind"]], doc["metadata"]["name"]
        try:
            objects.create_cluster_custom_object(GROUP, VERSION, plural, doc)
            changed = True
        except ApiException as exc:
            if exc.status != 409:
                raise
            current = cast(Obj, objects.get_cluster_custom_object(GROUP, VERSION, plural, name))
            if _plain(current) != _plain(doc):
                changed = True
                version = current["metadata"]["resourceVersion"]
                replacement = {**doc, "metadata": {**doc["metadata"], "resourceVersion": version}}
                objects.replace_cluster_custom_object(GROUP, VERSION, plural, name, replacement)
    if not changed:
        return
    for doc in documents():
        for rule in doc.get("rules") or [] if doc["kind"] == "ClusterRole" else []:
            for group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        _until(api, verb, resource, group, expected=True)


def _plain(data: Obj) -> Obj:
    """The rules, or the subjects and roleRef, of a role or binding, for comparison."""
    return {k: data.get(k) for k in ("rules", "subjects", "roleRef")}


def revoke(api: client.ApiClient, verb: str, resource: str, group: str | None = None) -> None:
    """Take ``verb`` on ``resource`` (in API ``group``, any when None) out of the ClusterRoles of
    docs/rbac.yaml in the cluster; returns once the authorizer refuses it to tagpin."""
    objects = client.CustomObjectsApi(api)
    groups: set[str] = set()
    for doc in documents():
        if doc["kind"] != "ClusterRole":
            continue
        role = cast(
            Obj, objects.get_cluster_custom_object(GROUP, VERSION, "clusterroles", doc["metadata"]["name"])
        )
        rules: list[Obj] = []
        for rule in role.get("rules") or []:
            resources, verbs, api_groups = (
                rule.get("resources") or [],
                rule.get("verbs") or [],
                rule.get("apiGroups") or [],
            )
            if resource in resources and verb in verbs and (group is None or group in api_groups):
                groups.update(api_groups)
                rest = [r for r in resources if r != resource]
                others = [v for v in verbs if v != verb]
                if rest:
                    rules.append({"apiGroups": api_groups, "resources": rest, "verbs": verbs})
                if others:
                    rules.append({"apiGroups": api_groups, "resources": [resource], "verbs": others})
            else:
                rules.append(rule)
        if rules != role.get("rules"):
            role["rules"] = rules
            objects.replace_cluster_custom_object(
                GROUP, VERSION, "clusterroles", role["metadata"]["name"], role
            )
    for found in groups:
        _until(api, verb, resource, found, expected=False)


def can(api: client.ApiClient, verb: str, resource: str, group: str = "", namespace: str = "") -> bool:
    """Whether the authorizer allows tagpin ``verb`` on ``resource`` (a SubjectAccessReview)."""
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=USER,
            groups=["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(
                verb=verb, resource=resource, group=group, namespace=namespace or None
            ),
        )
    )
    answer = client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(answer.status and answer.status.allowed)


def _until(api: client.ApiClient, verb: str, resource: str, group: str, expected: bool) -> None:
    """The authorizer reads roles from its cache: wait (briefly) until it answers as expected."""
    deadline = time.monotonic() + 10
    while can(api, verb, resource, group) != expected:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the authorizer still {'refuses' if expected else 'allows'} {verb} {resource}"
            )
        time.sleep(0.05)
