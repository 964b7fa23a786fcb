"""Authorization: a small RBAC model per token, and the reviews clients ask about it
(``SelfSubjectAccessReview``: ``kubectl auth can-i``, ``tagpin doctor``; ``SelfSubjectRulesReview``:
``kubectl auth can-i --list``).

By default a token may do everything (a cluster-admin), so nothing changes for callers that never
ask. :meth:`Authz.grant` restricts a token to a list of :class:`Rule` s, as RBAC does: rules only
allow, and a request no rule allows is refused with the API server's 403 ``Forbidden`` and its
message. :func:`rules_from_manifests` reads the rules of ClusterRoles and Roles (e.g.
``docs/rbac.yaml``). The self reviews are always allowed (``system:basic-user`` in a real cluster).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from . import proto
from .resources import ApiError, Obj, Resource
from .state import State

GROUP, VERSION = "authorization.k8s.io", "v1"
REVIEWS = {
    "selfsubjectaccessreviews": "SelfSubjectAccessReview",
    "selfsubjectrulesreviews": "SelfSubjectRulesReview",
}
DEFAULT_USER = "system:serviceaccount:tagpin-system:tagpin"


@dataclass(frozen=True)
class Rule:
    """One RBAC policy rule. ``namespaces=None``: every namespace and the cluster scope (a ClusterRole
    bound by a ClusterRoleBinding); a tuple: only those namespaces (a RoleBinding)."""

    verbs: tuple[str, ...]
    resources: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ("*",)
    namespaces: tuple[str, ...] | None = None
    non_resource_urls: tuple[str, ...] = ()

    def allows(self, verb: str, group: str, resource: str, namespace: str) -> bool:
        return (
            _match(self.verbs, verb)
            and _match(self.api_groups, group)
            and _match(self.resources, resource)
            and (self.namespaces is None or (namespace != "" and namespace in self.namespaces))
        )

    def allows_path(self, verb: str, path: str) -> bool:
        return _match(self.verbs, verb) and any(
            u in ("*", path) or (u.endswith("*") and path.startswith(u[:-1])) for u in self.non_resource_urls
        )

    def as_resource_rule(self) -> Obj:
        return {
            "verbs": list(self.verbs),
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
        }


def _match(allowed: Iterable[str], value: str) -> bool:
    return any(a in ("*", value) for a in allowed)


def rules_from_manifests(text: str, namespaces: tuple[str, ...] | None = None) -> list[Rule]:
    """Every rule of the ClusterRoles and Roles in a YAML stream (bindings are not read: the rules
    apply to the token they are granted to)."""
    import yaml

    rules: list[Rule] = []
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict) or doc.get("kind") not in ("ClusterRole", "Role"):
            continue
        scope = namespaces
        if doc["kind"] == "Role":
            scope = (str((doc.get("metadata") or {}).get("namespace") or "default"),)
        for rule in doc.get("rules") or []:
            rules.append(
                Rule(
                    verbs=tuple(rule.get("verbs") or ()),
                    resources=tuple(rule.get("resources") or ()),
                    api_groups=tuple(rule.get("apiGroups") or ()),
                    namespaces=scope,
                    non_resource_urls=tuple(rule.get("nonResourceURLs") or ()),
                )
            )
    return rules


def verb_of(method: str, named: bool, query: dict[str, str]) -> str:
    """The RBAC verb of a request, as the API server derives it."""
    if method == "GET":
        if query.get("watch") in ("true", "1"):
            return "watch"
        return "get" if named else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


class Authz(State):
    """Tokens, their users and their rules (``None``: everything allowed)."""

    _grants: dict[str, tuple[Rule, ...] | None]
    _users: dict[str, str]
    token: str | None

    # -- Python API for tests and the local stack
    def add_token(self, token: str, user: str = DEFAULT_USER, rules: Iterable[Rule] | None = None) -> None:
        """Accept another bearer token, for ``user``, allowed ``rules`` (None: everything)."""
        with self._lock:
            self._users[token] = user
            self._grants[token] = None if rules is None else tuple(rules)

    def grant(self, rules: Iterable[Rule] | None, token: str | None = None) -> None:
        """Restrict ``token`` (default: the simulator's own) to ``rules``; ``None`` allows everything."""
        key = token or self.token or ""
        with self._lock:
            self._grants[key] = None if rules is None else tuple(rules)

    def revoke(self, verb: str, resource: str, group: str = "*", token: str | None = None) -> None:
        """Take ``verb`` on ``resource`` (in ``group``; ``*``: any) away from ``token``'s rules. A rule
        listing more resources is split so that the others keep the verb; an unrestricted token must
        be granted rules first."""
        key = token or self.token or ""
        with self._lock:
            current = self._grants.get(key)
            if current is None:
                raise ValueError("the token is unrestricted: grant() it rules first")
            kept: list[Rule] = []
            for rule in current:
                if verb not in rule.verbs or (group != "*" and not _match(rule.api_groups, group)):
                    kept.append(rule)
                elif resource in rule.resources:
                    others = tuple(r for r in rule.resources if r != resource)
                    if others:
                        kept.append(replace(rule, resources=others))
                    kept.append(
                        replace(rule, verbs=tuple(v for v in rule.verbs if v != verb), resources=(resource,))
                    )
                elif "*" in rule.resources:
                    kept.append(replace(rule, verbs=tuple(v for v in rule.verbs if v != verb)))
                else:
                    kept.append(rule)
            self._grants[key] = tuple(kept)

    def user_of(self, token: str | None) -> str:
        return self._users.get(token or "", DEFAULT_USER)

    def authenticates(self, token: str | None) -> bool:
        """Without a token of its own the simulator is open; otherwise the token must be known."""
        return self.token is None or (token is not None and (token == self.token or token in self._users))

    def allowed(self, token: str | None, verb: str, group: str, resource: str, namespace: str) -> bool:
        with self._lock:
            rules = self._grants.get(token or "")
        return rules is None or any(r.allows(verb, group, resource, namespace) for r in rules)

    # -- the REST side
    def _authorize(
        self, token: str | None, verb: str, res: Resource, ns: str | None, name: str | None, sub: str
    ) -> None:
        resource = f"{res.plural}/{sub}" if sub else res.plural
        if self.allowed(token, verb, res.group, resource, ns or ""):
            return
        what = f'{res.qualified} "{name}"' if name else res.qualified
        where = f'in the namespace "{ns}"' if ns else "at the cluster scope"
        raise ApiError(
            403,
            f'{what} is forbidden: User "{self.user_of(token)}" cannot {verb} resource "{resource}" '
            f'in API group "{res.group}" {where}',
            "Forbidden",
            {"name": name, "group": res.group, "kind": res.plural}
            if name
            else {"group": res.group, "kind": res.plural},
        )

    def _review(self, token: str | None, method: str, path: str, ctype: str | None, body: bytes) -> Obj:
        """``POST /apis/authorization.k8s.io/v1/<selfsubject…reviews>``."""
        parts = [p for p in path.split("/") if p]
        kind = REVIEWS.get(parts[-1]) if len(parts) == 4 else None
        if kind is None:
            raise ApiError(404, "the server could not find the requested resource")
        if method != "POST":
            raise ApiError(405, f"{method} is not supported here", "MethodNotAllowed")
        if (ctype or "").startswith(proto.PROTOBUF):  # kubectl's typed clients send protobuf
            review: Any = proto.review_from_protobuf(body)
        else:
            try:
                review = json.loads(body or b"null")
            except ValueError as exc:
                raise ApiError(400, f"invalid JSON body: {exc}") from None
        if not isinstance(review, dict) or review.get("kind") not in (None, kind):
            raise ApiError(400, f"the body must be a {kind}")
        spec = review.get("spec") or {}
        out: Obj = {
            "kind": kind,
            "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {"creationTimestamp": None},
            "spec": copy.deepcopy(spec),
        }
        out["status"] = (
            self._access(token, spec) if kind == "SelfSubjectAccessReview" else self._rules_of(token, spec)
        )
        return out | {"__code__": 201}

    def _access(self, token: str | None, spec: Obj) -> Obj:
        with self._lock:
            rules = self._grants.get(token or "")
        if (attrs := spec.get("resourceAttributes")) is not None:
            verb, group = str(attrs.get("verb") or ""), str(attrs.get("group") or "")
            resource = str(attrs.get("resource") or "")
            if attrs.get("subresource"):
                resource += "/" + str(attrs["subresource"])
            ns = str(attrs.get("namespace") or "")
            match = (
                next((r for r in rules if r.allows(verb, group, resource, ns)), None)
                if rules is not None
                else None
            )
        elif (attrs := spec.get("nonResourceAttributes")) is not None:
            verb, path = str(attrs.get("verb") or ""), str(attrs.get("path") or "")
            match = next((r for r in rules if r.allows_path(verb, path)), None) if rules is not None else None
        else:
            raise ApiError(
                400, "spec.resourceAttributes or spec.nonResourceAttributes is required", "Invalid"
            )
        if rules is None:
            return {
                "allowed": True,
                "reason": 'RBAC: allowed by ClusterRoleBinding "kubesim" of ClusterRole "cluster-admin"',
            }
        if match is None:  # RBAC has no opinion: no reason, as a real server answers
            return {"allowed": False}
        return {"allowed": True, "reason": f"RBAC: allowed by rule {json.dumps(match.as_resource_rule())}"}

    def _rules_of(self, token: str | None, spec: Obj) -> Obj:
        ns = str(spec.get("namespace") or "")
        with self._lock:
            rules = self._grants.get(token or "")
        if rules is None:
            return {
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False,
            }
        return {
            "resourceRules": [
                r.as_resource_rule()
                for r in rules
                if r.resources and (r.namespaces is None or ns in r.namespaces)
            ],
            "nonResourceRules": [
                {"verbs": list(r.verbs), "nonResourceURLs": list(r.non_resource_urls)}
                for r in rules
                if r.non_resource_urls
            ],
            "incomplete": False,
        }


def discovery(parts: list[str]) -> Obj | None:
    """The authorization group's resource list."""
    if parts != ["apis", GROUP, VERSION]:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{VERSION}",
        "resources": [
            {"name": plural, "singularName": "", "namespaced": False, "kind": kind, "verbs": ["create"]}
            for plural, kind in REVIEWS.items()
        ],
    }
