"""Reaching clusters with the official ``kubernetes`` client (consumer only: never imported by
the webhook or the poller).

- EKS: endpoint and CA from ``eks:DescribeCluster``; a bearer token presigned from STS
  ``GetCallerIdentity`` with the ``x-k8s-aws-id`` header, as ``aws eks get-token`` does, regenerated
  before its 15-minute validity ends; optionally through an assumed role.
- Any other cluster: a kubeconfig from Secrets Manager, or a file for local use.

A cluster that cannot be reached or rejects the credentials raises ``Unreachable`` for the
targets in it only.
"""

from __future__ import annotations

import base64
import logging
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
import urllib3
import yaml
from botocore.exceptions import BotoCoreError, ClientError
from botocore.signers import RequestSigner
from kubernetes.client import ApiClient, AppsV1Api, BatchV1Api, Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.config import new_client_from_config_dict
from kubernetes.config.config_exception import ConfigException

from tagpin.config import Cluster, Kind, TagpinConfig
from tagpin.rollout import Conflict, Forbidden, NotFound, Unreachable, Workload, WorkloadError

logger = logging.getLogger(__name__)

TOKEN_LIFETIME_S = 14 * 60  # EKS honours a token 15 minutes after signing
REQUEST_TIMEOUT = (3.0, 15.0)  # connect, read


def eks_token(cluster_name: str, session: boto3.session.Session, region: str) -> str:
    """``k8s-aws-v1.<base64url presigned STS GetCallerIdentity URL>``."""
    sts = session.client("sts", region_name=region)
    signer = RequestSigner(
        sts.meta.service_model.service_id,
        region,
        "sts",
        "v4",
        session.get_credentials(),
        session.events,
    )
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"{sts.meta.endpoint_url}/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {"x-k8s-aws-id": cluster_name},
            "context": {},
        },
        region_name=region,
        expires_in=60,
        operation_name="",
    )
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def _ca_file(pem: bytes) -> str:
    handle = tempfile.NamedTemporaryFile(prefix="tagpin-ca-", suffix=".pem", delete=False)  # noqa: SIM115
    with handle:
        handle.write(pem)
    return handle.name


def _session(role_arn: str | None, region: str) -> boto3.session.Session:
    if role_arn is None:
        return boto3.session.Session(region_name=region)
    creds = boto3.client("sts", region_name=region).assume_role(RoleArn=role_arn, RoleSessionName="tagpin")[
        "Credentials"
    ]
    return boto3.session.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=region,
    )


def _bearer(configuration: Configuration, token: str) -> None:
    # Both keys: 36.0.0 read only BearerToken, others read authorization (see docs/build.md).
    for key in ("authorization", "BearerToken"):
        configuration.api_key[key] = token
        configuration.api_key_prefix[key] = "Bearer"


def eks_api_client(name: str, region: str, role_arn: str | None) -> ApiClient:
    session = _session(role_arn, region)
    described = session.client("eks", region_name=region).describe_cluster(name=name)["cluster"]
    if described.get("status") not in (None, "ACTIVE", "UPDATING"):
        raise Unreachable(f"EKS cluster {name} is {described.get('status')}")
    configuration = Configuration(host=described["endpoint"])
    configuration.ssl_ca_cert = _ca_file(base64.b64decode(described["certificateAuthority"]["data"]))
    expires = [0.0]

    def refresh(config: Configuration) -> None:
        if time.monotonic() >= expires[0]:
            _bearer(config, eks_token(name, session, region))
            expires[0] = time.monotonic() + TOKEN_LIFETIME_S - 60

    configuration.refresh_api_key_hook = refresh  # type: ignore[assignment]
    refresh(configuration)
    return ApiClient(configuration)


def kubeconfig_api_client(document: dict[str, Any], context: str | None) -> ApiClient:
    try:
        client: ApiClient = new_client_from_config_dict(document, context=context)  # type: ignore[no-untyped-call]
    except (ConfigException, KeyError, TypeError, ValueError) as exc:
        raise Unreachable(f"unusable kubeconfig: {exc}") from None
    return client


class KubeWorkloads:
    """The ``Workloads`` port over the official client (typed apps/v1 and batch/v1 APIs)."""

    def __init__(self, api: ApiClient) -> None:
        self._api = api
        apps, batch = AppsV1Api(api), BatchV1Api(api)
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

    def get(self, namespace: str, kind: Kind, name: str) -> Workload:
        obj = self._call(self._read[kind], name, namespace)
        data: dict[str, Any] = self._api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
        template = (
            data["spec"]["jobTemplate"]["spec"]["template"]
            if kind is Kind.CRONJOB
            else data["spec"]["template"]
        )
        pod = template.get("spec") or {}
        return Workload(
            resource_version=str(data["metadata"].get("resourceVersion", "")),
            containers={c["name"]: c.get("image", "") for c in pod.get("containers") or []},
            init_containers={c["name"]: c.get("image", "") for c in pod.get("initContainers") or []},
            template_annotations=dict((template.get("metadata") or {}).get("annotations") or {}),
        )

    def patch(self, namespace: str, kind: Kind, name: str, body: dict[str, Any]) -> None:
        # A dict body is sent as application/strategic-merge-patch+json by the client.
        self._call(self._patch[kind], name, namespace, body, field_manager="tagpin")

    @staticmethod
    def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as exc:
            raise _translate(exc) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(f"cluster unreachable: {type(exc).__name__}: {exc}") from None


def _translate(exc: ApiException) -> WorkloadError:
    status = exc.status or 0
    reason = exc.reason or ""
    if status == 409:
        return Conflict(reason or "conflict")
    if status == 404:
        return NotFound("workload not found")
    if status == 403:
        return Forbidden(
            "forbidden: tagpin needs get and patch on this workload kind in this namespace "
            "(see docs/rbac.yaml)"
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
        self._lock = threading.Lock()

    def __call__(self, name: str) -> KubeWorkloads:
        cluster = self._config().clusters.get(name)
        if cluster is None:
            raise Unreachable(f"cluster {name!r} is not in the configuration")
        with self._lock:
            cached = self._clients.get(name)
            if cached is not None and cached[0] == cluster:
                return cached[1]
        try:
            workloads = KubeWorkloads(self._connect(cluster))
        except (ClientError, BotoCoreError) as exc:
            raise Unreachable(f"cannot reach cluster {name!r}: {exc}") from None
        with self._lock:
            self._clients[name] = (cluster, workloads)
        return workloads

    def _connect(self, cluster: Cluster) -> ApiClient:
        if cluster.eks is not None:
            return eks_api_client(cluster.eks.name, cluster.eks.region, cluster.eks.role_arn)
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
        api.configuration.retries = 1
        return api
