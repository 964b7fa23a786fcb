"""`tagpin doctor`'s checks that only a deployed stack exercises (tests/e2e/test_doctor.py covers the
local stack): the stack's outputs and roles, the functions' environment, the functions' access to
each secret (IAM policy simulator) and EKS access entries. AWS is faked at the client level."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from tagpin import wiring
from tagpin.adapters.secrets import SecretNotFound, Secrets
from tagpin.domain.config import parse_config
from tagpin.settings import SecretStore
from tagpin_cli import doctor, doctor_clusters, doctor_seat, doctor_secrets
from tagpin_cli.doctor import Seat, Status
from tagpin_cli.environment import Stack

STACK_ID = "arn:aws:cloudformation:eu-west-1:111122223333:stack/tagpin/1"
OUTPUTS = {
    "WebhookUrl": "https://api.example/webhooks",
    "AlarmTopicArn": "arn:aws:sns:eu-west-1:111122223333:alarms",
    **{f"{f.capitalize()}FunctionName": f"tagpin-{f}" for f in doctor.FUNCTIONS},
}


def deployed(**outputs: str) -> Stack:
    return Stack(
        state_table="tagpin-state",
        queue_url="https://sqs/changes.fifo",
        dead_letter_queue_url="https://sqs/dlq.fifo",
        config_parameter="/tagpin/config",
        name="tagpin",
        region="eu-west-1",
        webhook_secret="tagpin/webhook",
        outputs=OUTPUTS | outputs,
    )


class Fake:
    """A client whose operations are the given callables."""

    def __init__(self, **operations: Any) -> None:
        self.__dict__.update(operations)
        self.exceptions = SimpleNamespace(ResourceNotFoundException=NotFound)


class NotFound(Exception):
    pass


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> dict[str, Fake]:
    found: dict[str, Fake] = {}
    monkeypatch.setattr(wiring, "aws", lambda service: found[service])
    return found


def stack_clients(found: dict[str, Fake], status: str = "UPDATE_COMPLETE") -> None:
    found["cloudformation"] = Fake(
        describe_stacks=lambda StackName: {"Stacks": [{"StackId": STACK_ID, "StackStatus": status}]},
        describe_stack_resources=lambda StackName: {
            "StackResources": [
                {
                    "LogicalResourceId": f"{f.capitalize()}FunctionRole",
                    "PhysicalResourceId": f"tagpin-{f}-role",
                }
                for f in doctor.FUNCTIONS
            ]
        },
    )
    found["dynamodb"] = Fake(describe_table=lambda TableName: {"Table": {"TableStatus": "ACTIVE"}})
    found["sqs"] = Fake(get_queue_attributes=lambda **_: {"Attributes": {}})


def test_the_stack_check_reads_outputs_status_and_each_functions_role(clients):
    stack_clients(clients)
    seat = Seat(deployed())
    (result,) = doctor.check_stack(seat)
    assert result.status is Status.OK and "UPDATE_COMPLETE" in result.detail
    assert seat.roles["consumer"] == "arn:aws:iam::111122223333:role/tagpin-consumer-role"
    assert set(seat.roles) == set(doctor.FUNCTIONS)


@pytest.mark.parametrize(
    ("outputs", "status", "named"),
    [
        ({"AlarmTopicArn": ""}, "UPDATE_COMPLETE", "AlarmTopicArn"),
        ({}, "UPDATE_ROLLBACK_COMPLETE", "ROLLBACK"),
    ],
)
def test_an_old_or_rolled_back_stack_fails(clients, outputs, status, named):
    stack_clients(clients, status)
    t = deployed()
    if outputs:
        t = Stack(**{**t.__dict__, "outputs": {k: v for k, v in t.outputs.items() if k not in outputs}})
    (result,) = doctor.check_stack(Seat(t))
    assert result.status is Status.FAIL and named in result.detail and "sam deploy" in result.fix


def test_a_function_missing_a_variable_fails_naming_it(clients):
    complete = {
        "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
        "TAGPIN_STATE_TABLE": "t",
        "TAGPIN_QUEUE_URL": "q",
        "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook",
        "TAGPIN_NOTIFICATIONS_QUEUE_URL": "n",
        "TAGPIN_IDEMPOTENCY_TABLE": "i",
        "TAGPIN_VERIFICATION_QUEUE_URL": "v",
        "TAGPIN_DEAD_LETTER_QUEUE_URL": "d",
    }

    def configuration(FunctionName: str) -> dict[str, Any]:
        env = dict(complete)
        if FunctionName == "tagpin-webhook":
            env.pop("TAGPIN_WEBHOOK_SECRET")
        return {"State": "Active", "LastUpdateStatus": "Successful", "Environment": {"Variables": env}}

    clients["lambda"] = Fake(get_function_configuration=configuration)
    results = {r.subject: r for r in doctor.check_functions(Seat(deployed()))}
    assert results["webhook"].status is Status.FAIL and "TAGPIN_WEBHOOK_SECRET" in results["webhook"].detail
    assert {r.status for s, r in results.items() if s != "webhook"} == {Status.OK}


CONFIG = """
clusters:
  lab: {kubeconfig: {secret: tagpin/clusters/lab, context: lab}}
registries:
  registry.example.com: {credentials_secret: tagpin/registries/example}
images:
  - image: registry.example.com/team/web:stable
    targets: [{cluster: lab, namespace: web, kind: Deployment, name: web, container: web}]
"""
SECRETS = {
    "tagpin/webhook": '{"distribution": "token"}',
    "tagpin/registries/example": '{"username": "robot", "password": "p"}',
    "tagpin/clusters/lab": "apiVersion: v1\ncontexts: [{name: lab, context: {}}]\n",
}


def secret_clients(clients: dict[str, Fake], parameter_type: str = "SecureString") -> None:
    """Both stores answer: an SSM parameter's ARN and type, a secret's ARN (6 random characters)."""
    clients["ssm"] = Fake(
        get_parameter=lambda Name: {
            "Parameter": {"ARN": f"arn:ssm:parameter{Name}", "Type": parameter_type, "Name": Name}
        }
    )
    clients["secretsmanager"] = Fake(
        describe_secret=lambda SecretId: {"ARN": f"arn:secret:{SecretId}-AbCdEf"}
    )


@pytest.mark.parametrize(
    ("store", "action", "webhook_arn"),
    [
        ("ssm", "ssm:GetParameter", "arn:ssm:parameter/tagpin/webhook"),
        ("secretsmanager", "secretsmanager:GetSecretValue", "arn:secret:tagpin/webhook-AbCdEf"),
    ],
)
def test_each_secret_is_checked_for_its_shape_and_each_readers_iam_access(
    clients, monkeypatch, store, action, webhook_arn
):
    monkeypatch.setattr(wiring, "secret_text", lambda name: SECRETS[name])
    secret_clients(clients)
    asked: list[tuple[str, str]] = []

    def simulate(PolicySourceArn: str, ActionNames: list[str], ResourceArns: list[str]) -> dict[str, Any]:
        assert ActionNames == [action]  # what reads a secret in the stack's store
        asked.append((PolicySourceArn.rsplit("/", 1)[1], ResourceArns[0]))
        denied = "reconciler" in PolicySourceArn and "clusters" in ResourceArns[0]
        return {"EvaluationResults": [{"EvalDecision": "implicitDeny" if denied else "allowed"}]}

    clients["iam"] = Fake(simulate_principal_policy=simulate)
    t = deployed()
    seat = Seat(Stack(**{**t.__dict__, "secret_store": store}), config=parse_config(CONFIG, source="test"))
    seat.roles = {f: f"arn:aws:iam::111122223333:role/{f}" for f in doctor.FUNCTIONS}
    results = {r.subject: r for r in doctor_secrets.check_secrets(seat)}
    assert (
        results["tagpin/webhook"].status is Status.OK
        and "sources: distribution" in results["tagpin/webhook"].detail
    )
    assert results["tagpin/registries/example"].status is Status.OK
    lab = results["tagpin/clusters/lab"]
    assert lab.status is Status.FAIL and "reconciler may not read it" in lab.detail
    assert ("webhook", webhook_arn) in asked
    assert {f for f, arn in asked if "registries" in arn} == set(doctor_seat.REGISTRY_READERS)

    SECRETS["tagpin/registries/example"] = '{"user": "robot"}'
    try:
        broken = {r.subject: r for r in doctor_secrets.check_secrets(seat)}["tagpin/registries/example"]
    finally:
        SECRETS["tagpin/registries/example"] = '{"username": "robot", "password": "p"}'
    assert broken.status is Status.FAIL and "unusable" in broken.detail and "robot" not in broken.detail


def test_a_secret_in_a_plain_string_parameter_warns(clients, monkeypatch):
    monkeypatch.setattr(wiring, "secret_text", lambda name: SECRETS[name])
    secret_clients(clients, parameter_type="String")
    clients["iam"] = Fake(
        simulate_principal_policy=lambda **_: {"EvaluationResults": [{"EvalDecision": "allowed"}]}
    )
    seat = Seat(deployed(), config=parse_config(CONFIG, source="test"))
    seat.roles = {f: f"arn:aws:iam::111122223333:role/{f}" for f in doctor.FUNCTIONS}
    webhook = {r.subject: r for r in doctor_secrets.check_secrets(seat)}["tagpin/webhook"]
    assert webhook.status is Status.WARN and "a String parameter, not a SecureString" in webhook.detail
    assert "--type SecureString --name /tagpin/webhook" in webhook.fix


@pytest.mark.parametrize(
    ("store", "fix"),
    [
        ("ssm", "aws ssm put-parameter --type SecureString --name /tagpin/webhook"),
        ("secretsmanager", "aws secretsmanager create-secret --name tagpin/webhook"),
    ],
)
def test_a_missing_secret_says_how_to_create_it_in_the_stacks_store(clients, monkeypatch, store, fix):
    def missing(name: str) -> str:
        raise SecretNotFound(f"the {Secrets(SecretStore(store)).where(name)} does not exist")

    monkeypatch.setattr(wiring, "secret_text", missing)
    t = deployed()
    seat = Seat(Stack(**{**t.__dict__, "secret_store": store}), config=parse_config(CONFIG, source="test"))
    webhook = {r.subject: r for r in doctor_secrets.check_secrets(seat)}["tagpin/webhook"]
    assert webhook.status is Status.FAIL and "does not exist" in webhook.detail
    assert webhook.fix.startswith(fix)


def test_the_stack_says_where_its_secrets_live(monkeypatch):
    """SecretStore from the stack's parameters; a stack older than the parameter used Secrets Manager."""
    from tagpin_cli import environment

    def described(parameters: dict[str, str]) -> Any:
        stack = {
            "Outputs": [
                {"OutputKey": k, "OutputValue": "x"}
                for k in ("StateTableName", "ChangesQueueUrl", "ChangesDeadLetterQueueUrl")
            ],
            "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
        }
        cfn = Fake(describe_stacks=lambda StackName: {"Stacks": [stack]})
        return SimpleNamespace(client=lambda service: cfn, region_name="eu-west-1")

    for parameters, store in (
        ({"SecretStore": "ssm"}, "ssm"),
        ({"SecretStore": "secretsmanager"}, "secretsmanager"),
        ({}, "secretsmanager"),
    ):
        monkeypatch.setattr("boto3.session.Session", lambda region_name=None, p=parameters: described(p))
        assert environment.deployed("tagpin").secret_store == store


EKS_CONFIG = """
clusters:
  prod: {eks: {name: prod, region: eu-west-1}}
images:
  - image: registry.example.com/team/web:stable
    targets: [{cluster: prod, namespace: web, kind: Deployment, name: web, container: web}]
"""


@pytest.fixture
def eks(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An active EKS cluster whose access entries map the consumer's role (not the reconciler's)."""
    entries = {"arn:aws:iam::111122223333:role/consumer": ["tagpin-consumer"]}

    def describe_access_entry(clusterName: str, principalArn: str) -> dict[str, Any]:
        if principalArn not in entries:
            raise NotFound(principalArn)
        return {"accessEntry": {"kubernetesGroups": entries[principalArn], "username": principalArn}}

    client = Fake(
        describe_cluster=lambda name: {
            "cluster": {"status": "ACTIVE", "accessConfig": {"authenticationMode": "API_AND_CONFIG_MAP"}}
        },
        describe_access_entry=describe_access_entry,
    )
    monkeypatch.setattr(doctor_clusters, "eks_client", lambda region: client)
    reached = doctor.Result("cluster", "prod", Status.OK, "reachable")
    monkeypatch.setattr(doctor_clusters, "_reach", lambda name, connector, where: (object(), reached))
    allowed: dict[str, Any] = {"groups": {"tagpin-consumer": {"get", "patch"}}, "error": None}

    def subject_review(api: Any, user: str, groups: list[str]) -> Any:
        def review(need: tuple[str, str, str, str]) -> bool:
            if allowed["error"]:
                raise allowed["error"]
            return any(need[0] in allowed["groups"].get(g, ()) for g in groups)

        return review

    monkeypatch.setattr(doctor_clusters, "subject_review", subject_review)
    return allowed


def eks_seat() -> Seat:
    config = parse_config(EKS_CONFIG, source="test")
    seat = Seat(deployed(), config=config, followed=list(config.images))
    seat.roles = {f: f"arn:aws:iam::111122223333:role/{f}" for f in doctor.FUNCTIONS}
    return seat


def test_eks_access_entries_and_their_groups_verbs(eks):
    results = {r.subject: r for r in doctor_clusters.check_clusters(eks_seat())}
    assert results["prod"].status is Status.OK
    assert results["prod: consumer"].status is Status.OK
    assert {s for s in results if s.startswith("prod: ")} == {"prod: consumer", "prod: reconciler"}
    missing = results["prod: reconciler"]
    assert missing.status is Status.FAIL and "no access entry" in missing.detail
    assert "--kubernetes-groups tagpin-reconciler" in missing.fix


def test_eks_verbs_are_named_when_missing_and_not_checked_when_the_operator_may_not_ask(eks):
    eks["groups"] = {"tagpin-consumer": {"get"}}
    results = {r.subject: r for r in doctor_clusters.check_clusters(eks_seat())}
    assert results["prod: consumer"].status is Status.FAIL
    assert results["prod: consumer"].detail == "missing: patch deployments.apps in namespace web"

    eks["error"] = ApiException(status=403, reason="Forbidden")
    results = {r.subject: r for r in doctor_clusters.check_clusters(eks_seat())}
    skipped = results["prod: consumer"]
    assert skipped.status is Status.SKIP and "not checked from here" in skipped.detail
    assert (
        "kubectl auth can-i patch deployments --as" in skipped.fix
        and "--as-group tagpin-consumer" in skipped.fix
    )


def test_the_verbs_each_function_needs(eks):
    config = parse_config(EKS_CONFIG, source="test")
    needs = doctor_clusters.needs(list(config.images[0].targets))
    assert needs["consumer"] == [
        ("get", "apps", "deployments", "web"),
        ("patch", "apps", "deployments", "web"),
    ]
    assert set(needs) == {"consumer", "reconciler"}
    assert ("list", "batch", "cronjobs", "") in needs["reconciler"] and ("list", "", "pods", "") in needs[
        "reconciler"
    ]
    assert ("get", "apps", "deployments", "web") in needs["reconciler"]
    # no target yet: every kind, at the cluster scope
    assert ("patch", "apps", "daemonsets", "") in doctor_clusters.needs([])["consumer"]


def test_the_console_is_checked_only_where_it_is_deployed(clients):
    active = {"State": "Active", "LastUpdateStatus": "Successful", "Environment": {"Variables": {}}}
    clients["lambda"] = Fake(get_function_configuration=lambda FunctionName: active)
    t = deployed()
    t = Stack(**{**t.__dict__, "outputs": {k: v for k, v in t.outputs.items() if k != "ConsoleFunctionName"}})
    results = {r.subject: r for r in doctor.check_functions(Seat(t))}
    assert results["console"].status is Status.SKIP and "ConsoleJwtIssuer" in results["console"].detail
    assert set(results) == set(doctor.FUNCTIONS)


def test_signature_keys_and_the_slack_signing_secret_are_checked_for_their_shape(clients, monkeypatch):
    from tagpin_local.cosign import Signer

    secrets = {
        **SECRETS,
        "tagpin/signing/release": Signer.generate("ed25519").public_pem,
        "tagpin/signing/broken": "-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----",
        "tagpin/notifications/hooks": json.dumps(
            {"slack": "https://hooks.slack.com/services/x", "slack_signing_secret": "s"}
        ),
    }
    monkeypatch.setattr(wiring, "secret_text", lambda name: secrets[name])
    secret_clients(clients)
    clients["iam"] = Fake(
        simulate_principal_policy=lambda **_: {"EvaluationResults": [{"EvalDecision": "allowed"}]}
    )
    gate = "    signatures: {keys: [{secret: tagpin/signing/release}, {secret: tagpin/signing/broken}]}\n"
    config = CONFIG.replace("    targets:", gate + "    targets:")
    config += "rollout: {notifications: {webhooks_secret: tagpin/notifications/hooks}}\n"
    seat = Seat(deployed(), config=parse_config(config, source="test"))
    seat.roles = {f: f"arn:aws:iam::111122223333:role/{f}" for f in doctor.FUNCTIONS}
    results = {r.subject: r for r in doctor_secrets.check_secrets(seat)}
    good, broken = results["tagpin/signing/release"], results["tagpin/signing/broken"]
    assert good.status is Status.OK and "ed25519 public key" in good.detail
    assert broken.status is Status.FAIL and "unusable" in broken.detail
    hooks = results["tagpin/notifications/hooks"]
    assert hooks.status is Status.OK and "Slack signing secret" in hooks.detail and '"s"' not in hooks.detail
