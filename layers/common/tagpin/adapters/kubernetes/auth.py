"""How tagpin authenticates to a cluster with the official client.

- EKS: endpoint and CA from ``eks:DescribeCluster``; a bearer token presigned from STS
  ``GetCallerIdentity`` with the ``x-k8s-aws-id`` header, as ``aws eks get-token`` does, regenerated
  before its 15-minute validity ends; optionally through a role assumed per cluster (cross-account),
  whose credentials botocore refreshes before they expire.
- Any other cluster: a kubeconfig (from a secret, or a file for local use), or endpoint + CA +
  service-account token from one secret.

Every client is built without hidden retries (``api_client``): see ``workloads.REQUEST_TIMEOUT``.
"""

from __future__ import annotations

import base64
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
import botocore.session
from botocore.config import Config as BotoConfig
from botocore.credentials import AssumeRoleCredentialFetcher, Credentials, DeferredRefreshableCredentials
from botocore.hooks import HierarchicalEmitter
from botocore.model import ServiceId
from botocore.signers import RequestSigner
from kubernetes.client import ApiClient, Configuration
from kubernetes.config import new_client_from_config_dict
from kubernetes.config.config_exception import ConfigException

from tagpin.ports.workloads import Unreachable

TOKEN_LIFETIME_S = 14 * 60  # EKS honours a token 15 minutes after signing
TOKEN_MARGIN_S = 60  # regenerate this long before the lifetime ends
AWS_TIMEOUTS = BotoConfig(connect_timeout=3, read_timeout=10, retries={"mode": "standard", "max_attempts": 3})


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
