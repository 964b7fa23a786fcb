"""IAM proven from what the code calls (tests/support/iam.py): the real handlers on the local stack,
driven through every kind of call their roles in template.yaml must cover, each call recorded and
evaluated against its function's role; then every action x resource of every statement of every
role must have been used by a call.

The world, once per secret store (``SecretStore``: ``ssm``, SecureString parameters ``/tagpin/...``,
the default; ``secretsmanager``, secrets ``tagpin/...``): a moto server with a customer KMS key (the
configuration is a SecureString and every secret is encrypted with it: ``KmsKeyArn`` set), two EKS
clusters in moto (one of this account, one of another account reached through a cluster role:
``ClusterRoleArns`` set) whose endpoints are real API servers that take EKS tokens (their access
entries map the callers to docs/rbac.yaml's groups), two kubeconfig clusters (a secret each), and
three registries: one with credentials in a secret, one of kind ECR (a token from moto's ECR), one
of kind ECR through a registry role of another account. Rollouts go through two
waves with notifications to SNS and to a webhook (secret). What Lambda itself does with each role
(polling the SQS sources, the OnFailure destination, the logs) is added from the template
(``platform_calls``). One image has a signature gate: a key in the secret store and a KMS key
(``SigningKmsKeyArns`` set).

The session-wide check (tests/support/iamsession.py) evaluates every other test's calls with the
default parameters (the SecretStore their TAGPIN_SECRET_STORE names); the calls here are captured
apart, for the parameters set here.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
import pytest
import yaml
from tagpin import wiring
from tagpin.adapters.lambda_parts import part_event
from tagpin.domain.messages import Trigger
from tagpin.domain.shards import PollPart
from tagpin.ports.state import TargetStatus
from tagpin_local.cosign import Signer, sign_image
from tagpin_local.http_adapter import WEBHOOK_ROUTE
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.manifests import deployment
from tagpin_local.lambda_runtime import LocalFunction, http_api_event
from tagpin_local.oci import push_image
from tagpin_local.registry_server import RegistryServer
from tagpin_local.stack import (
    CONFIG_PARAMETER,
    WEBHOOK_SECRET,
    LocalStack,
    StackOptions,
    cluster_secret,
)

from tests.conftest import require_binary
from tests.support.console import csrf_of, request, session_cookie
from tests.support.constants import FOLLOW
from tests.support.iam import Call, denied, platform_calls, unused
from tests.support.iamsession import RECORDER
from tests.support.stack import state_of

pytestmark = pytest.mark.integration

OTHER_ACCOUNT = "210987654321"
CLUSTER_ROLE = f"arn:aws:iam::{OTHER_ACCOUNT}:role/tagpin-deployer"
REGISTRY_ROLE = f"arn:aws:iam::{OTHER_ACCOUNT}:role/tagpin-registry-pull"
REGISTRY_SECRET = "tagpin/registries/local"
NOTIFY_SECRET = "tagpin/notifications/hooks"
SIGNING_SECRET = "tagpin/signing/release"
FUNCTIONS = ("poller", "webhook", "consumer", "reconciler", "console")
PARTS = 2  # PollParts: the scheduled poll starts its parts (lambda:InvokeFunction, PollerPartsPolicy)
DEADLINE_S = 60.0
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


@pytest.fixture(scope="module", params=["ssm", "secretsmanager"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """The world with its secrets in one store (the template's SecretStore, and the functions' too)."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=False,
        poll_interval=None,
        consume=False,
        clusters=["stage", "eks", "cross"],
        rollout_delay=ROLLOUT_S,
        secret_store=request.param,
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


def wait_for(what: str, condition: Callable[[], Any], step: Callable[[], Any]) -> None:
    started = time.monotonic()
    while time.monotonic() - started < DEADLINE_S:
        if condition():
            return
        step()
        time.sleep(0.2)
    raise AssertionError(f"not within {DEADLINE_S:.0f} s: {what}")


def notify(w: World, kind: str, digest: str, delivery: str) -> dict[str, Any]:
    """A push notification for ``kind``'s image, through the webhook handler."""
    body = json.dumps({"image": w.images[kind], "digest": digest, "id": delivery}).encode()
    headers = {"authorization": f"Bearer {w.st.webhook_token}", "content-type": "application/json"}
    event = http_api_event("POST", "/webhooks/generic", "", headers, body, "127.0.0.1", WEBHOOK_ROUTE)
    response: dict[str, Any] = w.st.functions["webhook"].invoke(event)
    assert response["statusCode"] == 202, response
    return response


def run_everything(w: World) -> None:
    """Each function through the calls its role must cover."""
    st = w.st
    digests = {
        kind: push_image(w.registries.get(kind, w.registries["secret"]).url, f"demo/{kind}", "stable")
        for kind in w.images
    }
    # signed: the consumer reads each signature (a manifest and its layer) at each kind of registry
    for kind in ("secret", "ecr", "ecr-cross", "late"):
        registry = w.registries.get(kind, w.registries["secret"])
        sign_image(registry.url, f"demo/{kind}", digests[kind], w.signer)
    for version in ("1.0.0", "1.1.0"):  # the version channel's tags (ECR)
        push_image(w.registries["ecr"].url, "demo/versioned", version)
    # webhook: notifications re-resolved at the registries (credentials in a secret; ECR: this
    # account's, another's through a registry role), each a change it enqueues; a delivery again
    # (deduplicated); an ECR event
    notify(w, "late", digests["late"], "d-0")
    notify(w, "ecr", digests["ecr"], "d-1")
    notify(w, "ecr", digests["ecr"], "d-1")
    notify(w, "ecr-cross", digests["ecr-cross"], "d-2")
    ecr_event = {
        "version": "0", "id": "e-1", "detail-type": "ECR Image Action", "source": "aws.ecr",
        "account": "123456789012", "time": "2025-11-21T05:20:00Z", "region": "us-east-1", "resources": [],
        "detail": {"result": "SUCCESS", "repository-name": "demo/web", "image-digest": digests["secret"],
                   "action-type": "PUSH", "image-tag": "stable"},
    }  # fmt: skip
    st.functions["webhook"].invoke(ecr_event)
    # poller: every registry kind (a secret, an ECR token, an ECR token through a registry role)
    st.run_poller()
    # a poll split in parts (PollParts): the scheduled invocation starts them (asynchronous
    # invocations of the poller itself), then each runs as Lambda runs it
    split_poll(st)
    # consumer: the first wave (kubeconfig clusters; one refuses connections), verified,
    # promoted to the second (EKS: this account's, and another account's through a cluster role)
    targets = [
        f"{c}/default/Deployment/{kind}/app"
        for kind in ("secret", "ecr", "ecr-cross")
        for c in ("eks", "cross")
    ]
    targets.append("eks/default/Deployment/late/app")

    def step() -> None:  # changes and verifications, one queue (a verification early: hidden till due)
        while st.consume_once(wait_s=0):
            pass

    def verified() -> bool:
        state = state_of(st)
        return all(
            (t := state.targets.get(target)) is not None and t.status is TargetStatus.VERIFIED
            for target in targets
        )

    wait_for("every image verified in the second wave", verified, step)
    # poller again: every tag unchanged with its targets settled, so their digests are settled
    # (a transaction checked against each tag's item); then a steady poll reads only those
    st.run_poller()
    st.run_poller()
    # a record that is neither a change nor a verification: the consumer fails it and makes it
    # visible again at once (its redelivery schedule), then it is left to the dead-letter queue
    st.client("sqs").send_message(
        QueueUrl=st.queue_url,
        MessageBody="not a message",
        MessageGroupId="junk",
        MessageDeduplicationId="junk",
    )
    assert st.consume_once(wait_s=1) >= 1
    # reconciler: every cluster and registry; a workload found by label, then gone (its target
    # removed); a workload a person put back by hand after tagpin's patch: held and announced (the
    # rollout notifications: SNS and the webhooks in their secret)
    st.kubes["local"].patch(
        "Deployment",
        "default",
        "secret",
        {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": f"{w.images['secret']}@sha256:{'0' * 64}"}
        ]}}}},
    )  # fmt: skip
    st.run_reconciler()
    w.kubes["cross"].delete("Deployment", "default", "found")
    st.run_reconciler()
    # a notification older than what is recorded (a later poll already saw the tag): not recorded
    stored = {"pk": {"S": f"TAG#{w.images['ecr']}"}, "sk": {"S": "STATE"}}
    later = str(int(time.time() * 1000) + 3_600_000)
    st.client("dynamodb").update_item(
        TableName="tagpin-state", Key=stored, UpdateExpression="SET observed_at = :t",
        ExpressionAttributeValues={":t": {"N": later}},
    )  # fmt: skip
    notify(w, "ecr", digests["ecr"], "d-3")
    console(w)


def split_poll(st: LocalStack) -> None:
    import os

    saved = os.environ.get("TAGPIN_POLL_PARTS")
    os.environ["TAGPIN_POLL_PARTS"] = str(PARTS)
    try:
        assert st.run_poller() == {"parts": PARTS}
        for index in range(PARTS):
            done = st.functions["poller"].invoke(part_event(PollPart(index, PARTS)))
            assert done["part"] == f"{index}of{PARTS}", done
    finally:
        if saved is None:
            os.environ.pop("TAGPIN_POLL_PARTS", None)
        else:
            os.environ["TAGPIN_POLL_PARTS"] = saved


def console(w: World) -> None:
    """The console: signed in, every page, a hold and a release (its healing change), the dead
    letters looked at and redriven (a change sent back, a failed run's record removed)."""
    st = w.st
    sqs = st.client("sqs")  # the test's own calls, not the function's: dead letters to look at
    change = {"image": w.images["secret"], "digest": "sha256:" + "1" * 64, "observed_at": 1, "changed_at": 1}
    sqs.send_message(
        QueueUrl=st.dlq_url, MessageBody=json.dumps(change), MessageGroupId="g", MessageDeduplicationId="c"
    )
    invoke = st.functions["console"].invoke
    cookie = session_cookie(invoke(request("POST", "/console/signin", form={"token": st.console_token})))
    assert cookie is not None
    target = "local/default/Deployment/secret/app"
    pages = [("/console", {}), ("/console/images", {}), ("/console/targets", {}), ("/console/holds", {}),
             ("/console/image", {"ref": w.images["secret"]}), ("/console/target", {"id": target}),
             ("/console/dead-letters", {})]  # fmt: skip
    for path, query in pages:
        assert invoke(request("GET", path, query, cookie=cookie))["statusCode"] == 200, path
    csrf = csrf_of(invoke(request("GET", "/console/targets", cookie=cookie))["body"])
    form = {"target": target, "image": w.images["secret"], "csrf": csrf}
    for name in ("hold", "release"):
        done = invoke(request("POST", f"/console/actions/{name}", form=form, cookie=cookie))
        assert done["statusCode"] == 303, done
    done = invoke(request("POST", "/console/actions/redrive", form={"csrf": csrf}, cookie=cookie))
    assert "n=1" in done["headers"]["Location"], done
    # a wave waiting for a person (set here): rejected through the console, the decision announced
    # (SNS, and the webhooks of the notification secret); a Slack click refused unsigned (the
    # notification secret has no slack_signing_secret)
    state, now, waiting = state_of(st), int(time.time() * 1000), "sha256:" + "2" * 64
    assert state.promotions.start(
        w.images["lost"], waiting, now, now, trigger=Trigger.POLL, correlation_id=None, dry_run=False
    )
    assert state.promotions.request_approval(w.images["lost"], waiting, 0, now, now + 3_600_000)
    form = {"image": w.images["lost"], "digest": waiting, "csrf": csrf}
    done = invoke(request("POST", "/console/actions/reject", form=form, cookie=cookie))
    assert "notice=rejected" in done["headers"]["Location"], done
    slack = request("POST", "/slack/actions", form={"payload": "{}"})
    assert invoke(slack)["statusCode"] == 401


@pytest.fixture(scope="module")
def calls(world: World) -> list[Call]:
    with RECORDER.capture() as sink:
        run_everything(world)
    assert not sink.unattributed, f"production calls made outside any invocation: {sink.unattributed}"
    environment = {name: value for name, value in sink.calls[0].environment} if sink.calls else {}
    platform = [c for fn in FUNCTIONS for c in platform_calls(fn, environment, world.parameters)]
    return sink.calls + platform


def test_every_call_is_allowed_by_its_functions_role(world: World, calls: list[Call]) -> None:
    assert {c.function for c in calls} == set(FUNCTIONS)
    assert denied(calls, world.parameters) == []


def test_every_statement_is_used_by_a_call(world: World, calls: list[Call]) -> None:
    assert unused(calls, FUNCTIONS, world.parameters) == []
