"""The world of the IAM proof (tests/integration/test_iam.py), built on the local stack: every kind
of cluster, registry, secret and key a stack's roles must cover.

Once per secret store (``SecretStore``: ``ssm``, SecureString parameters ``/tagpin/...``, the
default; ``secretsmanager``, secrets ``tagpin/...``): a moto server with a customer KMS key (the
configuration is a SecureString and every secret is encrypted with it: ``KmsKeyArn`` set), two EKS
clusters in moto (one of this account, one of another account reached through a cluster role:
``ClusterRoleArns`` set) whose endpoints are real API servers that take EKS tokens (their access
entries map the callers to docs/rbac.yaml's groups), two kubeconfig clusters (a secret each), and
three registries: one with credentials in a secret, one of kind ECR (a token from
moto's ECR), one of kind ECR through a registry role of another account (``RegistryRoleArns``
set). Rollouts go through two waves with notifications to SNS and to a webhook (secret). One image
has a signature gate: a key in the secret store and a KMS key (``SigningKmsKeyArns`` set).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
import yaml
from tagpin import wiring
from tagpin_local.cosign import Signer
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.manifests import deployment
from tagpin_local.lambda_runtime import LocalFunction
from tagpin_local.registry_server import RegistryServer
from tagpin_local.stack import CONFIG_PARAMETER, WEBHOOK_SECRET, LocalStack, StackOptions, cluster_secret

from tests.support.constants import FOLLOW

OTHER_ACCOUNT = "210987654321"
CLUSTER_ROLE = f"arn:aws:iam::{OTHER_ACCOUNT}:role/tagpin-deployer"
REGISTRY_ROLE = f"arn:aws:iam::{OTHER_ACCOUNT}:role/tagpin-registry-pull"
REGISTRY_SECRET = "tagpin/registries/local"
NOTIFY_SECRET = "tagpin/notifications/hooks"
SIGNING_SECRET = "tagpin/signing/release"
PARTS = 2  # PollParts: the scheduled poll starts its parts (lambda:InvokeFunction, PollerPartsPolicy)
ROLLOUT_S = 0.5
SLOW_ROLLOUT_S = 8.0  # cluster stage: its verifications find the rollout progressing, again later


@dataclass
class World:
    st: LocalStack
    key: str  # the customer KMS key's ARN
    signing_key: str  # a KMS signing key's ARN (a signature gate's key: kms:GetPublicKey)
    signer: Signer  # the key in the secret store (the same gate's other key)
    kubes: dict[str, LocalCluster]  # every cluster by its configuration name
    hosts: dict[str, str]  # "secret", "ecr", "ecr-cross": registry hosts
    registries: dict[str, RegistryServer]
    images: dict[str, str]  # host kind -> followed image

    @property
    def parameters(self) -> dict[str, str]:
        return {
            "KmsKeyArn": self.key,
            "ClusterRoleArns": CLUSTER_ROLE,
            "SigningKmsKeyArns": self.signing_key,
            "RegistryRoleArns": REGISTRY_ROLE,
            "PollParts": str(PARTS),
            "SecretStore": self.st.options.secret_store,
        }


def _eks_cluster(st: LocalStack, kube: LocalCluster, name: str, role_arn: str | None) -> None:
    """An EKS cluster in moto (in the role's account when given) whose endpoint is ``kube``: its API
    server takes EKS tokens (tagpin_local.kube.eks), and its access entry maps the identity tagpin
    calls with (this account's, or the role's) to the groups docs/rbac.yaml binds."""
    from moto.eks.models import eks_backends

    client = st.client("eks")
    account = "123456789012"
    if role_arn is not None:
        creds = st.client("sts").assume_role(RoleArn=role_arn, RoleSessionName="setup")["Credentials"]
        client = boto3.session.Session(
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
        ).client("eks", endpoint_url=st.aws_endpoint, region_name="us-east-1")
        account = role_arn.split(":")[4]
    client.create_cluster(
        name=name, roleArn=f"arn:aws:iam::{account}:role/eks", resourcesVpcConfig={"subnetIds": []}
    )
    cluster = eks_backends[account]["us-east-1"].clusters[name]
    cluster.endpoint = kube.url
    cluster.certificate_authority = {"data": base64.b64encode(kube.ca_pem).decode()}
    # the functions' own identity locally is moto's default user; across accounts, the role
    principal = role_arn or f"arn:aws:iam::{account}:user/moto"
    kube.as_eks(name, st.aws_endpoint, {principal: ("tagpin-consumer", "tagpin-reconciler")})


@contextlib.contextmanager
def build_world(secret_store: str) -> Iterator[World]:
    """The world with its secrets in ``secret_store`` (the template's SecretStore, and the
    functions' too)."""
    options = StackOptions(
        notifications=False,
        poll_interval=None,
        consume=False,
        clusters=["stage", "eks", "cross"],
        rollout_delay=ROLLOUT_S,
        secret_store=secret_store,
    )
    registries = {"ecr": RegistryServer(), "ecr-cross": RegistryServer()}
    with LocalStack(options) as st:
        # Lambda's Invoke answered without running anything (moto's Lambda without Docker): the
        # parts of a split poll are recorded as they are started, then run here as Lambda would.
        httpx.post(
            f"{st.aws_endpoint}/moto-api/config", json={"lambda": {"use_docker": False}}
        ).raise_for_status()
        try:
            for registry in registries.values():
                registry.start()
            yield _build(st, registries)
        finally:
            httpx.post(f"{st.aws_endpoint}/moto-api/config", json={"lambda": {"use_docker": True}})
            for registry in registries.values():
                registry.stop()


def _build(st: LocalStack, registries: dict[str, RegistryServer]) -> World:
    assert st.registry is not None
    key = st.client("kms").create_key(Description="tagpin")["KeyMetadata"]["Arn"]
    _eks_cluster(st, st.kubes["eks"], "tagpin-eks", None)
    _eks_cluster(st, st.kubes["cross"], "tagpin-cross", CLUSTER_ROLE)
    # every secret in the stack's store, encrypted with the customer key
    for name in (cluster_secret("local"), cluster_secret("stage")):
        st.put_secret(name, st.secret_value(name), key=key)
    st.put_secret(WEBHOOK_SECRET, json.dumps({"generic": {"token": st.webhook_token}}), key=key)
    st.put_secret(REGISTRY_SECRET, json.dumps({"username": "u", "password": "p"}), key=key)
    # Notifications to an address that refuses at once: the secret is read, the post fails quietly.
    # A cluster that refuses connections: applying there fails (and releases the idempotency record).
    gone = {"apiVersion": "v1", "kind": "Config", "current-context": "gone",
            "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
            "users": [{"name": "gone", "user": {"token": "t"}}],
            "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}]}  # fmt: skip
    st.put_secret(cluster_secret("gone"), yaml.safe_dump(gone), key=key)
    st.put_secret(NOTIFY_SECRET, json.dumps({"http": "http://127.0.0.1:9/"}), key=key)
    # Signature gates: a key in the secret store (every registry kind's image is signed with it), and
    # for the image followed in the second wave only, a KMS key too (its public half read).
    signer = Signer.generate()
    st.put_secret(SIGNING_SECRET, signer.public_pem, key=key)
    signing_key = st.client("kms").create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"][
        "Arn"
    ]
    hosts = {
        "secret": st.registry.host,
        "ecr": registries["ecr"].host,
        "ecr-cross": registries["ecr-cross"].host,
    }
    images = {kind: f"{host}/demo/{kind}:stable" for kind, host in hosts.items()}
    # Followed only in the second wave: the first has nothing of it to verify, so the consumer that
    # applies its first change promotes it at once.
    late = f"{hosts['secret']}/demo/late:stable"
    # Followed only in the cluster whose rollouts take long: verified again and again.
    slow = f"{hosts['secret']}/demo/slow:stable"
    st.kubes["stage"].rollout_delay = SLOW_ROLLOUT_S
    st.kubes["stage"].create(deployment("slow", "default", "placeholder", container="app"))
    # Followed only in the cluster that refuses connections.
    lost = f"{hosts['secret']}/demo/lost:stable"
    kubes = st.kubes
    target = {"namespace": "default", "kind": "Deployment", "container": "app"}
    for kind in images:
        for cluster in ("local", "eks", "cross"):
            kubes[cluster].create(deployment(kind, "default", "placeholder", container="app"))
    kubes["eks"].create(deployment("late", "default", "placeholder", container="app"))
    # A version channel of an ECR repository: its tags listed (ecr:ListImages), the head resolved.
    versioned = f"{hosts['ecr']}/demo/versioned"
    st.kubes["local"].create(deployment("versioned", "default", "placeholder", container="app"))
    # Followed by label only: the reconciler discovers it (and keeps the index).
    kubes["cross"].create(deployment("found", "default", images["secret"], container="app", labels=FOLLOW))
    document = {
        "clusters": {
            "local": {"kubeconfig": {"secret": cluster_secret("local"), "context": "local"}},
            "stage": {"kubeconfig": {"secret": cluster_secret("stage"), "context": "stage"}},
            "eks": {"eks": {"name": "tagpin-eks", "region": "us-east-1"}},
            "cross": {"eks": {"name": "tagpin-cross", "region": "us-east-1", "role_arn": CLUSTER_ROLE}},
            "gone": {"kubeconfig": {"secret": cluster_secret("gone")}},
        },
        "registries": {
            hosts["secret"]: {"insecure": True, "credentials_secret": REGISTRY_SECRET},
            hosts["ecr"]: {"insecure": True, "kind": "ecr", "ecr": {"region": "us-east-1"}},
            hosts["ecr-cross"]: {
                "insecure": True,
                "kind": "ecr",
                "ecr": {"region": "us-east-1", "role_arn": REGISTRY_ROLE},
            },
        },
        "images": [
            {
                "image": image,
                "signatures": {"keys": [{"secret": SIGNING_SECRET}]},
                "targets": [{**target, "cluster": c, "name": kind} for c in ("local", "eks", "cross")],
            }
            for kind, image in images.items()
        ]
        + [
            {
                "image": late,
                "signatures": {"keys": [{"secret": SIGNING_SECRET}, {"kms": signing_key}]},
                "targets": [{**target, "cluster": "eks", "name": "late"}],
            },
            {"image": lost, "targets": [{**target, "cluster": "gone", "name": "lost"}]},
            {"image": slow, "targets": [{**target, "cluster": "stage", "name": "slow"}]},
            {
                "image": versioned,
                "policy": "^1",
                "targets": [{**target, "cluster": "local", "name": "versioned"}],
            },
        ],
        "rollout": {
            "verify_interval_seconds": 1,
            "soak_seconds": 0,
            "waves": [
                {"name": "first", "clusters": ["local", "gone", "stage"]},
                {"name": "second", "clusters": ["eks", "cross"]},
            ],
            "notifications": {"sns": True, "webhooks_secret": NOTIFY_SECRET},
        },
    }
    # One process runs every function here, and the composition root caches across invocations
    # (configuration, secrets, ECR tokens, cluster clients): each invocation starts in a new
    # container instead, so that each function makes every call it needs itself.
    for function in st.functions.values():
        assert isinstance(function, LocalFunction)  # the IAM recorder sees calls made in this process
        _cold(function)
    text = yaml.safe_dump(document, sort_keys=False)
    st.client("ssm").put_parameter(
        Name=CONFIG_PARAMETER, Value=text, Type="SecureString", KeyId=key, Overwrite=True
    )
    wiring.reset()
    return World(
        st,
        key,
        signing_key,
        signer,
        kubes,
        hosts,
        {"secret": st.registry, **registries},
        {**images, "late": late, "lost": lost, "slow": slow},
    )


def _cold(function: LocalFunction) -> None:
    invoke = function.invoke

    def cold(event: dict[str, Any]) -> Any:
        wiring.reset()
        return invoke(event)

    function.invoke = cold  # type: ignore[method-assign]
