"""``tagpin doctor``'s cluster checks: each cluster reachable, and the verbs each function needs.

What each function does in a cluster (docs/rbac.yaml), per workload kind:

- consumer: get and patch the workloads it rolls (and get them again to follow the rollout, patch
  them back on a rollback);
- reconciler: list every kind in all namespaces (the ``tagpin.dev/follow`` label), get the
  configured workloads, list pods (what they run).

The namespaces are those of the followed targets in that cluster (configuration and index); a
cluster with no target yet is checked at the cluster scope.

**kubeconfig and service-account clusters.** The functions use exactly the credentials in the
secret, and so does the doctor (through the same ``ClusterConnector``): a
``SelfSubjectAccessReview`` made with them answers for the functions.

**EKS clusters.** The functions use their IAM roles, mapped to Kubernetes groups by access
entries; the doctor has the operator's credentials, not theirs. So it checks what it can from
there: ``eks:DescribeCluster`` (active, authentication mode lets access entries work), that an
access entry exists for each function's principal (its role, or the cluster's ``role_arn``) and
its Kubernetes groups, that the API server answers the operator, and the verbs of the entry's
user and groups with a ``SubjectAccessReview`` when the operator may create one (a cluster
admin may); otherwise the verbs are "not checked" and it says how to check them by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tagpin.domain.kinds import PROFILES

from tagpin_cli.doctor_seat import CLUSTER_READERS, Result, Seat, Status, short

# (API group, resource) of every kind: its profile's (custom ones are listed in every cluster, too)
KINDS = {p.kind: (p.group, p.plural) for p in PROFILES}
Need = tuple[str, str, str, str]  # verb, API group, resource, namespace ("" = all namespaces)
Review = Callable[[Need], bool]
RBAC_FIX = "kubectl apply -f docs/rbac.yaml, bound to {who} (docs/deploying.md, docs/rbac.yaml)"


def needs(targets: list[Any]) -> dict[str, list[Need]]:
    """The (verb, group, resource, namespace) each function needs in a cluster with ``targets``."""
    scoped = sorted({(t.kind.value, t.namespace) for t in targets}) or [(k, "") for k in KINDS]
    rolled = [(KINDS[kind], ns) for kind, ns in scoped]
    return {
        "consumer": [(v, g, r, ns) for (g, r), ns in rolled for v in ("get", "patch")],
        "reconciler": [
            *(("list", g, r, "") for g, r in KINDS.values()),
            *(("get", g, r, ns) for (g, r), ns in rolled),
            ("list", "", "pods", ""),
        ],
    }


def describe(need: Need) -> str:
    verb, group, resource, ns = need
    where = f"in namespace {ns}" if ns else "in all namespaces"
    return f"{verb} {resource}{'.' + group if group else ''} {where}"


def permissions(
    cluster: str, review: Review, targets: list[Any], who: str, only: str | None = None
) -> list[Result]:
    """One result per function (or only ``only``): every verb it needs allowed, or the missing ones."""
    answers: dict[Need, bool] = {}
    results = []
    for function, wanted in needs(targets).items():
        if only is not None and function != only:
            continue
        missing = []
        for need in wanted:
            if need not in answers:
                answers[need] = review(need)
            if not answers[need]:
                missing.append(describe(need))
        if missing:
            results.append(
                Result(
                    "permissions",
                    f"{cluster}: {function}",
                    Status.FAIL,
                    "missing: " + "; ".join(missing),
                    RBAC_FIX.format(who=who),
                )
            )
        else:
            verbs = sorted({n[0] for n in wanted})
            results.append(
                Result("permissions", f"{cluster}: {function}", Status.OK, f"allowed: {', '.join(verbs)}")
            )
    return results


def check_clusters(seat: Seat) -> list[Result]:
    from tagpin import wiring
    from tagpin.adapters.kubernetes.clusters import ClusterConnector

    connector = ClusterConnector(wiring.config, wiring.secret_text)
    results: list[Result] = []
    for name, cluster in sorted(seat.config.clusters.items()):
        targets = [t for f in seat.followed for t in f.targets if t.cluster == name]
        if cluster.eks is not None:
            results.extend(_eks(seat, name, cluster, connector, targets))
        else:
            secret = (
                cluster.service_account.secret
                if cluster.service_account is not None
                else cluster.kubeconfig.secret or cluster.kubeconfig.file
            )
            results.extend(_with_secret(name, str(secret), connector, targets))
    return results


def _reach(name: str, connector: Any, where: str) -> tuple[Any, Result]:
    """The cluster's API client and whether it answers (``GET /version``)."""
    from kubernetes.client import VersionApi
    from kubernetes.client.exceptions import ApiException
    from tagpin.adapters.kubernetes.workloads import REQUEST_TIMEOUT
    from tagpin.ports.workloads import WorkloadError

    fix = (
        f"check that cluster {name} is up and its API server reachable from the functions "
        f"(endpoint, network, private endpoint/VPC); its access: {where}"
    )
    try:
        api = connector(name).api
        version = VersionApi(api).get_code(_request_timeout=REQUEST_TIMEOUT)
    except WorkloadError as exc:
        return None, Result("cluster", name, Status.FAIL, f"unreachable: {exc}", fix)
    except ApiException as exc:
        if exc.status == 401:
            return None, Result(
                "cluster",
                name,
                Status.FAIL,
                "the API server rejected the credentials (401)",
                f"renew the token or certificate in {where}",
            )
        return None, Result(
            "cluster", name, Status.FAIL, f"the API server answered {exc.status} {exc.reason}", fix
        )
    except Exception as exc:  # urllib3 and socket errors: no answer
        return None, Result("cluster", name, Status.FAIL, f"unreachable: {short(exc)}", fix)
    return api, Result(
        "cluster", name, Status.OK, f"reachable (Kubernetes {version.git_version}) via {where}"
    )


def self_review(api: Any) -> Review:
    """A ``SelfSubjectAccessReview`` per need, with the client's own credentials."""
    from kubernetes.client import AuthorizationV1Api, V1ResourceAttributes, V1SelfSubjectAccessReview
    from kubernetes.client import V1SelfSubjectAccessReviewSpec as Spec
    from tagpin.adapters.kubernetes.workloads import REQUEST_TIMEOUT

    authz = AuthorizationV1Api(api)

    def review(need: Need) -> bool:
        verb, group, resource, ns = need
        attributes = V1ResourceAttributes(verb=verb, group=group, resource=resource, namespace=ns or None)
        answer = authz.create_self_subject_access_review(
            V1SelfSubjectAccessReview(spec=Spec(resource_attributes=attributes)),
            _request_timeout=REQUEST_TIMEOUT,
        )
        return bool(answer.status and answer.status.allowed)

    return review


def subject_review(api: Any, user: str, groups: list[str]) -> Review:
    """A ``SubjectAccessReview`` per need for ``user`` in ``groups`` (the operator must be allowed to
    create them; a 403 raises ``ApiException``)."""
    from kubernetes.client import AuthorizationV1Api, V1ResourceAttributes, V1SubjectAccessReview
    from kubernetes.client import V1SubjectAccessReviewSpec as Spec
    from tagpin.adapters.kubernetes.workloads import REQUEST_TIMEOUT

    authz = AuthorizationV1Api(api)

    def review(need: Need) -> bool:
        verb, group, resource, ns = need
        attributes = V1ResourceAttributes(verb=verb, group=group, resource=resource, namespace=ns or None)
        answer = authz.create_subject_access_review(
            V1SubjectAccessReview(spec=Spec(user=user, groups=groups, resource_attributes=attributes)),
            _request_timeout=REQUEST_TIMEOUT,
        )
        return bool(answer.status and answer.status.allowed)

    return review


def eks_client(region: str) -> Any:
    """An EKS client with the operator's credentials."""
    import boto3

    return boto3.session.Session(region_name=region).client("eks")


def _with_secret(name: str, secret: str, connector: Any, targets: list[Any]) -> list[Result]:
    api, reached = _reach(name, connector, f"secret {secret}")
    if api is None:
        return [reached, Result("permissions", name, Status.SKIP, "needs the cluster")]
    who = f"the identity in {secret} (the same for the consumer and the reconciler)"
    try:
        return [reached, *permissions(name, self_review(api), targets, who)]
    except Exception as exc:
        return [
            reached,
            Result("permissions", name, Status.FAIL, f"could not ask: {short(exc)}", "run again with -v"),
        ]


_GROUPS = {"consumer": "tagpin-consumer", "reconciler": "tagpin-reconciler"}


def _eks(seat: Seat, name: str, cluster: Any, connector: Any, targets: list[Any]) -> list[Result]:
    eks_cfg = cluster.eks
    where = f"EKS {eks_cfg.name} in {eks_cfg.region}" + (
        f" through {eks_cfg.role_arn}" if eks_cfg.role_arn else ""
    )
    client = eks_client(eks_cfg.region)
    results: list[Result] = []
    try:
        described = client.describe_cluster(name=eks_cfg.name)["cluster"]
    except Exception as exc:
        return [
            Result(
                "cluster",
                name,
                Status.FAIL,
                f"{where}: DescribeCluster failed: {short(exc)}",
                "check the name and region",
            )
        ]
    mode = (described.get("accessConfig") or {}).get("authenticationMode", "CONFIG_MAP")
    state = described.get("status", "?")
    api, reached = _reach(name, connector, where)
    results.append(reached)
    if state != "ACTIVE" or "API" not in mode:
        results.append(
            Result(
                "cluster",
                name,
                Status.FAIL,
                f"status {state}, authentication mode {mode}",
                "access entries need authentication mode API or API_AND_CONFIG_MAP "
                "(aws eks update-cluster-config --access-config authenticationMode=API_AND_CONFIG_MAP)",
            )
        )
        return results
    for function in CLUSTER_READERS:
        principal = eks_cfg.role_arn or seat.roles.get(function)
        if principal is None:
            results.append(Result("permissions", f"{name}: {function}", Status.SKIP, "its role is unknown"))
            continue
        try:
            entry = client.describe_access_entry(clusterName=eks_cfg.name, principalArn=principal)[
                "accessEntry"
            ]
        except client.exceptions.ResourceNotFoundException:
            results.append(
                Result(
                    "permissions",
                    f"{name}: {function}",
                    Status.FAIL,
                    f"no access entry for {principal}",
                    f"aws eks create-access-entry --cluster-name {eks_cfg.name} --principal-arn {principal} "
                    f"--kubernetes-groups {_GROUPS[function]} (or EksAccessEntryCluster)",
                )
            )
            continue
        except Exception as exc:
            results.append(
                Result(
                    "permissions",
                    f"{name}: {function}",
                    Status.SKIP,
                    f"access entries not readable: {short(exc)}",
                )
            )
            continue
        groups = list(entry.get("kubernetesGroups") or [])
        user = str(entry.get("username") or principal)
        results.extend(_eks_verbs(api, name, function, user, groups, targets))
    return results


def _eks_verbs(
    api: Any, name: str, function: str, user: str, groups: list[str], targets: list[Any]
) -> list[Result]:
    """The verbs of the access entry's user and groups, by SubjectAccessReview when the operator may."""
    from kubernetes.client.exceptions import ApiException

    manual = f"check by hand: kubectl auth can-i patch deployments --as {user} " + " ".join(
        f"--as-group {g}" for g in groups or [_GROUPS[function]]
    )
    listed = ", ".join(groups) or "none"
    if api is None:
        return [
            Result("permissions", f"{name}: {function}", Status.SKIP, f"groups {listed}; needs the cluster")
        ]
    try:
        return permissions(
            name, subject_review(api, user, groups), targets, f"the group(s) {listed}", function
        )
    except ApiException as exc:
        return [
            Result(
                "permissions",
                f"{name}: {function}",
                Status.SKIP,
                f"access entry found (groups {listed}); its verbs are not checked from here: "
                f"SubjectAccessReview answered {exc.status}",
                manual,
            )
        ]
