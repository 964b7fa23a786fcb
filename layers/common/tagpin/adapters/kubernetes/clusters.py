"""Reaching clusters with the official ``kubernetes`` client (consumer and reconciler only: never
imported by the webhook or the poller).

- EKS: endpoint and CA from ``eks:DescribeCluster``; a bearer token presigned from STS
  ``GetCallerIdentity`` with the ``x-k8s-aws-id`` header, as ``aws eks get-token`` does, regenerated
  before its 15-minute validity ends; optionally through a role assumed per cluster (cross-account),
  whose credentials botocore refreshes before they expire.
- Any other cluster: a kubeconfig from Secrets Manager (context selectable) or a file for local use;
  or endpoint + CA + service-account token from one Secrets Manager secret.

A cluster that cannot be reached, is not ready or rejects the credentials raises ``Unreachable``
for the work in it only. A client whose credentials were rejected (401) is rebuilt on next use,
so a rotated token or kubeconfig secret is picked up without a cold start.
"""

from __future__ import annotations

import base64
import json
import logging
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.session
import urllib3
import yaml
from botocore.config import Config as BotoConfig
from botocore.credentials import AssumeRoleCredentialFetcher, Credentials, DeferredRefreshableCredentials
from botocore.exceptions import BotoCoreError, ClientError
from botocore.hooks import HierarchicalEmitter
from botocore.model import ServiceId
from botocore.signers import RequestSigner
from kubernetes.client import ApiClient, AppsV1Api, BatchV1Api, Configuration, CoreV1Api
from kubernetes.client.exceptions import ApiException
from kubernetes.config import new_client_from_config_dict
from kubernetes.config.config_exception import ConfigException

from tagpin.domain.config import Cluster, Kind, TagpinConfig
from tagpin.ports.workloads import Conflict, Forbidden, NotFound, Pod, Unreachable, Workload, WorkloadError

logger = logging.getLogger(__name__)

TOKEN_LIFETIME_S = 14 * 60  # EKS honours a token 15 minutes after signing
TOKEN_MARGIN_S = 60  # regenerate this long before the lifetime ends
# Every cluster call ends within connect + read timeout, and is tried once by the client (no hidden
# urllib3 retries): the consumer's and the verifier's time budgets (RESERVE_MS) rely on it.
REQUEST_TIMEOUT = (3.0, 10.0)  # connect, read
AWS_TIMEOUTS = BotoConfig(connect_timeout=3, read_timeout=10, retries={"mode": "standard", "max_attempts": 3})
DOWN_FOR_S = 30.0  # a cluster that did not answer is skipped this long (per warm container)
PAGE_SIZE = 500  # items per LIST page (the API server's own default chunk size)

_RESOURCES = {
    Kind.DEPLOYMENT: "deployments.apps",
    Kind.STATEFULSET: "statefulsets.apps",
    Kind.DAEMONSET: "daemonsets.apps",
    Kind.CRONJOB: "cronjobs.batch",
}


def sts_endpoint(region: str) -> str:
    """The regional STS endpoint of ``region``. Always regional: EKS accepts a token only when it
    was presigned for the host it expects for the cluster's region, and which host botocore picks
    by itself depends on its version and ``AWS_STS_REGIONAL_ENDPOINTS`` (older versions, or
    ``legacy``, give the global ``sts.amazonaws.com`` while signing for the region: a 401)."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://sts.{region}.{suffix}"


def eks_token(cluster_name: str, credentials: Credentials, region: str) -> str:
    """``k8s-aws-v1.<base64url presigned STS GetCallerIdentity URL>``, as ``aws eks get-token``
    makes it: signed for ``region`` against its regional endpoint, with ``x-k8s-aws-id`` signed."""
    events = HierarchicalEmitter()  # the signer keeps only a weak reference: keep it alive here
    signer = RequestSigner(ServiceId("sts"), region, "sts", "v4", credentials, events)
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"{sts_endpoint(region)}/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {"x-k8s-aws-id": cluster_name},
            "context": {},
        },
        region_name=region,
        expires_in=60,
        operation_name="",
    )
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class EksToken:
    """``Configuration.refresh_api_key_hook``: the client calls it before every request; a new
    token is presigned when the current one is within ``TOKEN_MARGIN_S`` of its lifetime."""

    def __init__(
        self,
        cluster_name: str,
        credentials: Credentials,
        region: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._name = cluster_name
        self._credentials = credentials
        self._region = region
        self._clock = clock
        self._expires = 0.0
        self._lock = threading.Lock()
        self.generated = 0

    def __call__(self, configuration: Configuration) -> None:
        with self._lock:
            now = self._clock()
            if now < self._expires:
                return
            _bearer(configuration, eks_token(self._name, self._credentials, self._region))
            self._expires = now + TOKEN_LIFETIME_S - TOKEN_MARGIN_S
            self.generated += 1


def _ca_file(pem: bytes) -> str:
    handle = tempfile.NamedTemporaryFile(prefix="tagpin-ca-", suffix=".pem", delete=False)  # noqa: SIM115
    with handle:
        handle.write(pem)
    return handle.name


def aws_credentials(role_arn: str | None) -> Credentials:
    """This function's credentials, or a role's, refreshed by botocore before they expire (a
    cached client outlives the one-hour assumed-role session)."""
    base = botocore.session.get_session()
    source = base.get_credentials()
    if role_arn is None:
        return source
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=base.create_client,
        source_credentials=source,
        role_arn=role_arn,
        extra_args={"RoleSessionName": "tagpin"},
    )
    return DeferredRefreshableCredentials(refresh_using=fetcher.fetch_credentials, method="assume-role")


def _client(service: str, credentials: Credentials, region: str) -> Any:
    frozen = credentials.get_frozen_credentials()
    return boto3.session.Session(
        aws_access_key_id=frozen.access_key,
        aws_secret_access_key=frozen.secret_key,
        aws_session_token=frozen.token,
        region_name=region,
    ).client(service, config=AWS_TIMEOUTS)


def _bearer(configuration: Configuration, token: str) -> None:
    # Both keys: 36.0.0 read only BearerToken, others read authorization (see docs/build.md).
    for key in ("authorization", "BearerToken"):
        configuration.api_key[key] = token
        configuration.api_key_prefix[key] = "Bearer"


def eks_api_client(name: str, region: str, role_arn: str | None) -> ApiClient:
    credentials = aws_credentials(role_arn)
    described = _client("eks", credentials, region).describe_cluster(name=name)["cluster"]
    if described.get("status") not in (None, "ACTIVE", "UPDATING"):
        raise Unreachable(f"EKS cluster {name} is not ready: {described.get('status')}")
    configuration = Configuration(host=described["endpoint"])
    configuration.ssl_ca_cert = _ca_file(base64.b64decode(described["certificateAuthority"]["data"]))
    hook = EksToken(name, credentials, region)
    configuration.refresh_api_key_hook = hook  # type: ignore[assignment]
    hook(configuration)
    return api_client(configuration)


def kubeconfig_api_client(document: dict[str, Any], context: str | None) -> ApiClient:
    configuration = type.__call__(Configuration)  # a fresh one, not the client's process-wide default
    try:
        new_client_from_config_dict(  # type: ignore[no-untyped-call]
            document, context=context, client_configuration=configuration, persist_config=False
        )
    except (ConfigException, KeyError, TypeError, ValueError) as exc:
        raise Unreachable(f"unusable kubeconfig: {exc}") from None
    return api_client(configuration)


def api_client(configuration: Configuration) -> ApiClient:
    """The client of one cluster. No hidden retries: the connection pool is built with the
    configuration's ``retries`` when the client is made (setting it later changes nothing), and
    every call ends within ``REQUEST_TIMEOUT`` (the time budgets rely on it)."""
    configuration.retries = 0
    return ApiClient(configuration)


def service_account_api_client(secret: dict[str, Any]) -> ApiClient:
    """``{"endpoint", "ca.crt", "token"}``; ``ca.crt`` may be PEM or base64 of PEM."""
    try:
        endpoint, token = str(secret["endpoint"]), str(secret["token"])
    except KeyError as exc:
        raise Unreachable(f"the cluster secret has no {exc.args[0]!r}") from None
    configuration = Configuration(host=endpoint)
    if ca := secret.get("ca.crt"):
        pem = str(ca).encode()
        configuration.ssl_ca_cert = _ca_file(pem if b"-----BEGIN" in pem else base64.b64decode(pem))
    _bearer(configuration, token)
    return api_client(configuration)


def workload_from(kind: Kind, data: dict[str, Any]) -> Workload:
    """A workload (as the API serves it, JSON) in the form tagpin reads."""
    spec = data.get("spec") or {}
    template = (
        ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
        if kind is Kind.CRONJOB
        else spec.get("template")
    ) or {}
    pod = template.get("spec") or {}
    meta = data.get("metadata") or {}
    return Workload(
        resource_version=str(meta.get("resourceVersion", "")),
        containers={c["name"]: c.get("image", "") for c in pod.get("containers") or []},
        init_containers={c["name"]: c.get("image", "") for c in pod.get("initContainers") or []},
        template_annotations=dict((template.get("metadata") or {}).get("annotations") or {}),
        kind=kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        selector=None if kind is Kind.CRONJOB else spec.get("selector"),
        generation=int(meta.get("generation") or 0),
        spec={k: v for k, v in spec.items() if k in ("replicas", "updateStrategy", "strategy")},
        status=dict(data.get("status") or {}),
    )


def pod_from(data: dict[str, Any]) -> Pod:
    meta = data.get("metadata") or {}
    status = data.get("status") or {}
    statuses = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    return Pod(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        image_ids={str(c.get("name")): str(c.get("imageID") or "") for c in statuses},
    )


class KubeWorkloads:
    """The ``Workloads`` port (rollout) and the ``Inventory`` port (reconcile) over the official
    client. LISTs are read as JSON (``_preload_content=False``): a page of 500 workloads is not
    worth building 500 generated models for."""

    def __init__(
        self, api: ApiClient, page_size: int = PAGE_SIZE, breaker: ClusterBreaker | None = None
    ) -> None:
        self._api = api
        self._page_size = page_size
        self._breaker = breaker or ClusterBreaker("cluster")
        self.rejected = False  # the cluster answered 401: rebuild the client before the next use
        apps, batch, self._core = AppsV1Api(api), BatchV1Api(api), CoreV1Api(api)
        self._read: dict[Kind, Callable[..., Any]] = {
            Kind.DEPLOYMENT: apps.read_namespaced_deployment,
            Kind.STATEFULSET: apps.read_namespaced_stateful_set,
            Kind.DAEMONSET: apps.read_namespaced_daemon_set,
            Kind.CRONJOB: batch.read_namespaced_cron_job,
        }
        self._patch: dict[Kind, Callable[..., Any]] = {
            Kind.DEPLOYMENT: apps.patch_namespaced_deployment,
            Kind.STATEFULSET: apps.patch_namespaced_stateful_set,
            Kind.DAEMONSET: apps.patch_namespaced_daemon_set,
            Kind.CRONJOB: batch.patch_namespaced_cron_job,
        }
        self._list: dict[Kind, Callable[..., Any]] = {
            Kind.DEPLOYMENT: apps.list_deployment_for_all_namespaces,
            Kind.STATEFULSET: apps.list_stateful_set_for_all_namespaces,
            Kind.DAEMONSET: apps.list_daemon_set_for_all_namespaces,
            Kind.CRONJOB: batch.list_cron_job_for_all_namespaces,
        }

    @property
    def api(self) -> ApiClient:
        """The cluster's API client, with the credentials the functions use (``tagpin doctor``)."""
        return self._api

    def get(self, namespace: str, kind: Kind, name: str) -> Workload:
        what = f"get {_RESOURCES[kind]} in namespace {namespace}"
        response = self._call(what, self._read[kind], name, namespace, _preload_content=False)
        return workload_from(kind, json.loads(response.data))

    def patch(self, namespace: str, kind: Kind, name: str, body: dict[str, Any]) -> None:
        # A dict body is sent as application/strategic-merge-patch+json by the client.
        what = f"patch {_RESOURCES[kind]} in namespace {namespace}"
        self._call(what, self._patch[kind], name, namespace, body, field_manager="tagpin")

    def workloads(self, kind: Kind, selector: str) -> Iterator[Workload]:
        """Every workload of ``kind`` in every namespace matching the label ``selector``, paged."""
        what = f"list {_RESOURCES[kind]} in all namespaces"
        for item in self._pages(what, self._list[kind], label_selector=selector):
            yield workload_from(kind, item)

    def pods(self, namespace: str) -> Iterator[Pod]:
        what = f"list pods in namespace {namespace}"
        for item in self._pages(what, self._core.list_namespaced_pod, namespace):
            yield pod_from(item)

    def _pages(
        self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Iterator[dict[str, Any]]:
        """Every item of a paged LIST. An expired continue token (410) restarts the list once, so
        items of the first pages may come twice: callers key them by namespace and name."""
        token: str | None = None
        restarted = False
        while True:
            try:
                response = self._call(
                    what, fn, *args, limit=self._page_size, _continue=token, _preload_content=False, **kwargs
                )
            except _Expired:
                # The continue token outlived the snapshot (410): list again from the start, once.
                if restarted or token is None:
                    raise Unreachable(f"{what}: the list snapshot expired twice") from None
                restarted, token = True, None
                continue
            page = json.loads(response.data)
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                return

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._breaker.check()
        try:
            answer = fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as exc:
            if exc.status == 401:
                self.rejected = True
            raise _translate(exc, what) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._breaker.failure()
            raise Unreachable(f"cluster unreachable: {type(exc).__name__}: {exc}") from None
        self._breaker.success()
        return answer


class ClusterBreaker:
    """A cluster that did not answer (connection refused, timed out) is skipped for ``DOWN_FOR_S``:
    the other targets of the batch in that cluster fail at once instead of each waiting for the
    timeout, and the other clusters' targets get the invocation's time."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name
        self._clock = clock
        self._until = 0.0

    def check(self) -> None:
        left = self._until - self._clock()
        if left > 0:
            raise Unreachable(f"cluster {self._name} did not answer; not asked again for {left:.0f} s")

    def failure(self) -> None:
        self._until = self._clock() + DOWN_FOR_S

    def success(self) -> None:
        self._until = 0.0


class _Expired(Unreachable):
    """410 Gone on a continued LIST."""


def _translate(exc: ApiException, what: str) -> WorkloadError:
    status = exc.status or 0
    reason = exc.reason or ""
    if status == 409:
        return Conflict(reason or "conflict")
    if status == 404:
        return NotFound("workload not found")
    if status == 410:
        return _Expired("continue token expired")
    if status == 403:
        verb, resource = what.split(" ", 2)[:2]
        return Forbidden(
            f"forbidden: {what}. tagpin needs the verb {verb!r} on {resource} "
            "(get, list and patch on the workload kinds, list on pods; see docs/rbac.yaml)"
        )
    if status == 401:
        return Unreachable("the cluster rejected tagpin's credentials (401)")
    return Unreachable(f"API server answered {status} {reason}".strip())


class ClusterConnector:
    """Builds and caches one API client per cluster across warm invocations."""

    def __init__(
        self,
        config: Callable[[], TagpinConfig],
        secret: Callable[[str], str],
    ) -> None:
        self._config = config
        self._secret = secret
        self._clients: dict[str, tuple[Cluster, KubeWorkloads]] = {}
        self._breakers: dict[str, ClusterBreaker] = {}
        self._lock = threading.Lock()

    def __call__(self, name: str) -> KubeWorkloads:
        cluster = self._config().clusters.get(name)
        if cluster is None:
            raise Unreachable(f"cluster {name!r} is not in the configuration")
        with self._lock:
            cached = self._clients.get(name)
            if cached is not None and cached[0] == cluster and not cached[1].rejected:
                return cached[1]
        try:
            breaker = self._breakers.setdefault(name, ClusterBreaker(name))
            breaker.check()
            workloads = KubeWorkloads(self._connect(cluster), breaker=breaker)
        except (ClientError, BotoCoreError) as exc:
            raise Unreachable(f"cannot reach cluster {name!r}: {exc}") from None
        except (ValueError, OSError, yaml.YAMLError) as exc:  # malformed secret, unreadable file
            # Never quote the parser's message: it can contain the secret's text (a token).
            where = getattr(exc, "problem_mark", None)
            at = f" at line {where.line + 1}" if where is not None else ""
            raise Unreachable(
                f"cannot reach cluster {name!r}: unusable credentials ({type(exc).__name__}{at})"
            ) from None
        with self._lock:
            self._clients[name] = (cluster, workloads)
        return workloads

    def _connect(self, cluster: Cluster) -> ApiClient:
        if cluster.eks is not None:
            return eks_api_client(cluster.eks.name, cluster.eks.region, cluster.eks.role_arn)
        if cluster.service_account is not None:
            document = json.loads(self._secret(cluster.service_account.secret))
            if not isinstance(document, dict):
                raise Unreachable("the cluster secret is not a JSON object")
            api = service_account_api_client(document)
        else:
            assert cluster.kubeconfig is not None
            source = cluster.kubeconfig
            if source.secret is not None:
                text = self._secret(source.secret)
            else:
                with open(source.file or "", encoding="utf-8") as handle:
                    text = handle.read()
            document = yaml.safe_load(text)
            if not isinstance(document, dict):
                raise Unreachable("the kubeconfig is not a mapping")
            api = kubeconfig_api_client(document, source.context)
        return api
