"""The command lines of the control plane's processes, in one place.

They follow controller-runtime's envtest (pkg/internal/testing/controlplane) where it has an
opinion; the choices of ours are described in :mod:`.cluster`. Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import os
from pathlib import Path

from .pki import KeyPair

CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
)
SERVICE_CIDR = "10.96.0.0/16"  # addresses only written into objects: nothing routes or dials them
POD_CIDR = "10.244.0.0/16"


def etcd(data_dir: Path, client_url: str, peer_url: str) -> list[str]:
    return [
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
        "--unsafe-no-fsync=true",  # a test cluster's data need not survive a power cut
        "--log-level=warn",
    ]


FRONT_PROXY_USER = "tagpin-kube-front"  # the CN of the front's client certificate (.front)


def apiserver(
    port: int,
    etcd_url: str,
    serving: KeyPair,
    client_ca: Path,
    sa: KeyPair,
    front_proxy_ca: Path,
    token_webhook: Path,
) -> list[str]:
    return [
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        f"--client-ca-file={client_ca}",
        f"--etcd-servers={etcd_url}",
        f"--service-account-issuer=https://127.0.0.1:{port}/",
        f"--service-account-key-file={sa.cert}",
        f"--service-account-signing-key-file={sa.key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=RBAC",
        "--allow-privileged=true",
        # it taints new nodes not-ready; the node-lifecycle controller that lifts it does not run
        "--disable-admission-plugins=TaintNodesByCondition",
        "--endpoint-reconciler-type=none",  # the "kubernetes" Service would point at 127.0.0.1
        "--profiling=false",
        # the fault-injecting front (.front) asserts the user of a client certificate it verified
        f"--requestheader-client-ca-file={front_proxy_ca}",
        f"--requestheader-allowed-names={FRONT_PROXY_USER}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        # EKS's bearer tokens, reviewed as aws-iam-authenticator reviews them (.eks)
        f"--authentication-token-webhook-config-file={token_webhook}",
        "--authentication-token-webhook-version=v1",
        "--authentication-token-webhook-cache-ttl=10s",
    ]


def _serving(port: int, serving: KeyPair, kubeconfig: Path) -> list[str]:
    return [
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",  # /healthz tells that it runs
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--profiling=false",
    ]


# The controller-manager's requests to the API server are held to Kubernetes' defaults (20 a second,
# 5 workloads synced at a time) unless TAGPIN_LOCAL_KUBE_BULK=1 when the cluster starts: a script that
# creates thousands of workloads (bench-cost: 10,000) would otherwise leave it a backlog of minutes, a
# patched workload's rollout reported late behind it. Not by default: on a 2-core machine an
# unthrottled controller's CPU is taken from what the other benches and the tests measure (50
# workloads rolled at once: API server, controller and etcd 3.1 -> 5.1 s of CPU).
BULK = "TAGPIN_LOCAL_KUBE_BULK"
BULK_FLAGS = (
    "--kube-api-qps=500",
    "--kube-api-burst=1000",
    "--concurrent-deployment-syncs=20",
    "--concurrent-replicaset-syncs=20",
)


def controller_manager(
    port: int, serving: KeyPair, kubeconfig: Path, root_ca: Path, sa: KeyPair
) -> list[str]:
    return [
        *_serving(port, serving, kubeconfig),
        f"--controllers={','.join(CONTROLLERS)}",
        f"--service-account-private-key-file={sa.key}",
        f"--root-ca-file={root_ca}",
        "--use-service-account-credentials=false",  # every controller acts as --kubeconfig's identity
        *(BULK_FLAGS if os.environ.get(BULK) == "1" else ()),
    ]


def scheduler(port: int, serving: KeyPair, kubeconfig: Path) -> list[str]:
    return _serving(port, serving, kubeconfig)


def kwok(port: int, kubeconfig: Path, node_annotation: str) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--manage-nodes-with-annotation-selector={node_annotation}=fake",
        "--enable-crds=Stage",  # the Stages are objects in the cluster (.kubelet), changed live
        f"--cidr={POD_CIDR}",
        "--node-ip=127.0.0.1",
        f"--server-address=127.0.0.1:{port}",
    ]
