"""Reaching clusters with the official ``kubernetes`` client (consumer and reconciler only: never
imported by the webhook or the poller).

- EKS: endpoint and CA from ``eks:DescribeCluster``; a bearer token presigned from STS
  ``GetCallerIdentity`` with the ``x-k8s-aws-id`` header, as ``aws eks get-token`` does, regenerated
  before its 15-minute validity ends; optionally through a role assumed per cluster (cross-account),
  whose credentials botocore refreshes before they expire.
- Any other cluster: a kubeconfig from a secret (context selectable) or a file for local use;
  or endpoint + CA + service-account token from one secret (``tagpin.adapters.secrets``).

A cluster that cannot be reached, is not ready or rejects the credentials raises ``Unreachable``
for the work in it only. A client whose credentials were rejected (401) is rebuilt on next use,
so a rotated token or kubeconfig secret is picked up without a cold start.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import yaml
from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client import ApiClient

from tagpin.adapters.kubernetes.auth import eks_api_client, kubeconfig_api_client, service_account_api_client
from tagpin.adapters.kubernetes.workloads import ClusterBreaker, KubeWorkloads
from tagpin.domain.config import Cluster, TagpinConfig
from tagpin.ports.workloads import Unreachable


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
