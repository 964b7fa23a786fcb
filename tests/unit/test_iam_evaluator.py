"""The parts of the IAM check (tests/support/iam.py): the evaluator's matching, calls turned into IAM
requests, the roles read from template.yaml, the attribution of calls to functions."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from moto.iam.access_control import PermissionResult
from tagpin_local.lambda_runtime import INVOKED

from tests.support.constants import REGION
from tests.support.iam import Call, Request, Statement, Underivable, parameter_arn, requests_of, secret_arn
from tests.support.iamplatform import platform_calls
from tests.support.iamroles import denied, logical_id, role, unused
from tests.support.iamsession import RECORDER
from tests.unit.template_support import invoked_asynchronously, load_template

P, D, N = PermissionResult.PERMITTED, PermissionResult.DENIED, PermissionResult.NEUTRAL
GET = "secretsmanager:GetSecretValue"
REG, CLU, NOTE, SIGN, HOOK = (
    "tagpin/registries/hub",
    "tagpin/clusters/lab",
    "tagpin/notifications/chat",
    "tagpin/signing/release",
    "tagpin/webhook",
)
SECRETS = "arn:aws:secretsmanager:us-east-1:123456789012:secret:"
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/tagpin-changes.fifo"
ENV = {
    "TAGPIN_STATE_TABLE": "tagpin-state",
    "TAGPIN_IDEMPOTENCY_TABLE": "tagpin-idempotency",
    "TAGPIN_QUEUE_URL": QUEUE,
    "TAGPIN_VERIFICATION_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/tagpin-verifications",
    "TAGPIN_NOTIFY_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:tagpin-notifications",
    "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
    "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook",
}


def allow(action: Any, resource: Any, **more: Any) -> Statement:
    return Statement({"Effect": "Allow", "Action": action, "Resource": resource, **more})


@pytest.mark.parametrize(
    ("statement", "action", "resource", "result"),
    [
        # ? is one character (moto 5.2.5 fails on it), as in a secret's 6-character suffix
        (allow(GET, SECRETS + "tagpin/webhook-??????"), GET,
         SECRETS + "tagpin/webhook-AbC123", P),
        (allow(GET, SECRETS + "tagpin/webhook-??????"), GET,
         SECRETS + "tagpin/webhook-AbC12", N),
        (allow(GET, SECRETS + "tagpin/webhook-??????"), GET,
         SECRETS + "tagpin/webhook", N),
        # . is a dot (moto 5.2.5 lets it match any character)
        (allow("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q.fifo"), "sqs:SendMessage",
         "arn:aws:sqs:us-east-1:1:qXfifo", N),
        # * spans any characters, slashes included
        (allow(GET, SECRETS + "tagpin/clusters/*"), GET,
         SECRETS + "tagpin/clusters/eu/lab-AbC123", P),
        (allow(GET, SECRETS + "tagpin/clusters/*"), GET,
         SECRETS + "tagpin/registries/lab-AbC123", N),
        # actions are case-insensitive, resources are not
        (allow("SQS:sendmessage", "*"), "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q", P),
        (allow("sqs:SendMessage*", "*"), "sqs:SendMessageBatch", "x", P),
        (allow("ssm:GetParameter", "arn:aws:ssm:us-east-1:1:parameter/tagpin/config"), "ssm:GetParameter",
         "arn:aws:ssm:us-east-1:1:parameter/Tagpin/config", N),
        # an explicit deny, NotAction
        (Statement({"Effect": "Deny", "Action": "sqs:*", "Resource": "*"}), "sqs:SendMessage", "x", D),
        (Statement({"Effect": "Allow", "NotAction": "sqs:*", "Resource": "*"}), "sqs:SendMessage", "x", N),
        (Statement({"Effect": "Allow", "NotAction": "sqs:*", "Resource": "*"}), "sns:Publish", "x", P),
    ],
)  # fmt: skip
def test_the_evaluator_matches_as_iam_does(
    statement: Statement, action: str, resource: str, result: PermissionResult
) -> None:
    assert statement.permits(action, resource) is result


def test_not_resource_is_refused_rather_than_ignored() -> None:
    with pytest.raises(ValueError, match="NotResource"):
        Statement({"Effect": "Allow", "Action": "sqs:*", "NotResource": "x"})


def test_calls_become_the_requests_iam_authorises() -> None:
    table = "arn:aws:dynamodb:us-east-1:123456789012:table/"
    assert requests_of("dynamodb", "BatchGetItem", {"RequestItems": {"a": {}, "b": {}}}, REGION) == [
        Request("dynamodb:BatchGetItem", table + "a"),
        Request("dynamodb:BatchGetItem", table + "b"),
    ]
    items = [{"Put": {"TableName": "a"}}, {"ConditionCheck": {"TableName": "b"}}]
    assert requests_of("dynamodb", "TransactWriteItems", {"TransactItems": items}, REGION) == [
        Request("dynamodb:PutItem", table + "a"),
        Request("dynamodb:ConditionCheckItem", table + "b"),
    ]
    assert requests_of("dynamodb", "Query", {"TableName": "a", "IndexName": "i"}, REGION) == [
        Request("dynamodb:Query", table + "a/index/i")
    ]
    assert requests_of("sqs", "SendMessageBatch", {"QueueUrl": QUEUE}, REGION) == [
        Request("sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:tagpin-changes.fifo")
    ]
    key = "arn:aws:kms:us-east-1:123456789012:key/k"
    assert requests_of(
        "ssm",
        "GetParameter",
        {"Name": "/tagpin/config", "WithDecryption": True},
        REGION,
        keys={"/tagpin/config": key},
    ) == [
        Request("ssm:GetParameter", "arn:aws:ssm:us-east-1:123456789012:parameter/tagpin/config"),
        Request("kms:Decrypt", key),
    ]
    assert requests_of("secretsmanager", "GetSecretValue", {"SecretId": "tagpin/webhook"}, REGION) == [
        Request("secretsmanager:GetSecretValue", SECRETS + "tagpin/webhook-AbC123")
    ]
    assert requests_of("eks", "DescribeCluster", {"name": "prod"}, "eu-west-1", "210987654321") == [
        Request("eks:DescribeCluster", "arn:aws:eks:eu-west-1:210987654321:cluster/prod")
    ]
    assert requests_of("ecr", "GetAuthorizationToken", {}, REGION) == [
        Request("ecr:GetAuthorizationToken", "*")
    ]
    assert requests_of("sts", "GetCallerIdentity", {}, REGION) == []  # needs no permission
    with pytest.raises(Underivable, match="dynamodb:ExecuteStatement"):
        requests_of("dynamodb", "ExecuteStatement", {}, REGION)


def secret_request(store: str, name: str) -> Request:
    """Reading the secret ``name`` in ``store``: the SecureString parameter "/" + name, or the secret."""
    if store == "ssm":
        return Request("ssm:GetParameter", parameter_arn("/" + name, REGION))
    return Request(GET, secret_arn(name, REGION))


@pytest.mark.parametrize("store", ["ssm", "secretsmanager"])
@pytest.mark.parametrize(
    ("function", "readable", "unreadable"),
    [
        ("poller", [REG], [CLU, NOTE, SIGN, HOOK]),
        ("webhook", [REG, HOOK], [CLU, NOTE, SIGN]),
        ("consumer", [REG, CLU, NOTE, SIGN], [HOOK, "tagpin/x"]),
        ("reconciler", [REG, CLU, NOTE], [SIGN, HOOK, "tagpin/x"]),
    ],
)  # fmt: skip
def test_each_role_reads_only_the_secrets_its_function_reads(
    store: str, function: str, readable: list[str], unreadable: list[str]
) -> None:
    """In the store its TAGPIN_SECRET_STORE names (SecretStore), and in no other."""
    granted = role(function, {**ENV, "TAGPIN_SECRET_STORE": store})
    other = "secretsmanager" if store == "ssm" else "ssm"
    for name in readable:
        assert granted.allowed(secret_request(store, name)), name
        assert not granted.allowed(secret_request(other, name)), name
    for name in unreadable:
        assert not granted.allowed(secret_request(store, name)), name


def test_roles_name_the_resources_the_environment_names() -> None:
    elsewhere = {**ENV, "TAGPIN_STATE_TABLE": "other-state"}
    item = Request("dynamodb:GetItem", "arn:aws:dynamodb:us-east-1:123456789012:table/other-state")
    assert role("poller", elsewhere).allowed(item)
    assert not role("poller", ENV).allowed(item)
    # the cluster roles only with ClusterRoleArns, the KMS key only with KmsKeyArn
    assume = Request("sts:AssumeRole", "arn:aws:iam::210987654321:role/deployer")
    assert not role("consumer", ENV).allowed(assume)
    assert role("consumer", ENV, {"ClusterRoleArns": assume.resource}).allowed(assume)
    decrypt = Request("kms:Decrypt", "arn:aws:kms:us-east-1:123456789012:key/k")
    assert not role("consumer", ENV).allowed(decrypt)
    assert role("consumer", ENV, {"KmsKeyArn": decrypt.resource}).allowed(decrypt)


def test_denied_and_unused_report_what_they_find() -> None:
    env = tuple(sorted(ENV.items()))
    cluster = Request("secretsmanager:GetSecretValue", secret_arn("tagpin/clusters/lab", REGION))
    (problem,) = denied([Call("webhook", "secretsmanager:GetSecretValue", (cluster,), environment=env)])
    assert "webhook (WebhookFunction's role) may not secretsmanager:GetSecretValue" in problem
    # a call made with an assumed role's credentials is that role's business
    assert (
        denied([Call("webhook", "x", (cluster,), principal="arn:aws:iam::1:role/r", environment=env)]) == []
    )
    config = Request("ssm:GetParameter", "arn:aws:ssm:us-east-1:123456789012:parameter/tagpin/config")
    problems = unused([Call("poller", "ssm:GetParameter", (config,), environment=env)], ["poller"])
    assert not any("ReadConfig" in p for p in problems)
    assert any(p.startswith("PollerFunction EnqueueChanges: sqs:SendMessage on") for p in problems)


def test_calls_are_attributed_on_the_threads_an_invocation_starts(aws: None) -> None:
    client = boto3.client("secretsmanager", region_name=REGION)
    client.create_secret(Name="tagpin/registries/a", SecretString=json.dumps({}))

    def read() -> None:
        client.get_secret_value(SecretId="tagpin/registries/a")

    with RECORDER.capture() as sink:
        read()  # no invocation: nobody's
        token = INVOKED.set("poller")
        try:
            with ThreadPoolExecutor(max_workers=2) as pool:
                list(pool.map(lambda _: read(), range(2)))
        finally:
            INVOKED.reset(token)
    assert [(c.function, c.operation) for c in sink.calls] == [
        ("poller", "secretsmanager:GetSecretValue")
    ] * 2


def test_a_failed_read_needs_no_kms_key_a_successful_one_does(aws: None) -> None:
    """The recorder learns a secret's customer key by the secret's name, and keeps it across tests. A
    read of that name where it does not exist (here another region; in CI a test reading a missing
    ``tagpin/webhook`` after test_iam's world had created one with a key) fails before anything is
    decrypted: only the Secrets Manager request is checked, not a kms:Decrypt its role need not allow."""
    from botocore.exceptions import ClientError

    key = boto3.client("kms", region_name=REGION).create_key(Description="k")["KeyMetadata"]["Arn"]
    here = boto3.client("secretsmanager", region_name=REGION)
    elsewhere = boto3.client("secretsmanager", region_name="eu-west-1")
    here.create_secret(Name=HOOK, SecretString="{}", KmsKeyId=key)
    with RECORDER.capture() as sink:
        token = INVOKED.set("webhook")
        try:
            here.get_secret_value(SecretId=HOOK)
            with pytest.raises(ClientError):
                elsewhere.get_secret_value(SecretId=HOOK)
        finally:
            INVOKED.reset(token)
    read, missing = sink.calls
    assert [r.action for r in read.requests] == [GET, "kms:Decrypt"]
    assert [r.action for r in missing.requests] == [GET]


def test_unused_covers_what_sam_adds_and_the_policies_attached_to_a_role() -> None:
    """PollerPartsPolicy (a separate AWS::IAM::Policy) is part of the poller's role when the poll is
    split, and the unused check sees it; so does it see SAM's statements: the basic execution role
    (but logs:CreateLogGroup, which SAM always adds and Lambda never needs here), the SQS source's
    managed policy, the destination of failed asynchronous invocations."""
    env = tuple(sorted(ENV.items()))
    poller = "arn:aws:lambda:us-east-1:123456789012:function:tagpin-poller"
    invoke = Request("lambda:InvokeFunction", poller)
    assert not role("poller", ENV).allowed(invoke)  # PollParts=1: no such policy
    split = {"PollParts": "4"}
    assert role("poller", ENV, split).allowed(invoke)
    assert requests_of("lambda", "Invoke", {"FunctionName": poller, "InvocationType": "Event"}, REGION) == [
        invoke
    ]
    problems = unused(platform_calls("poller", ENV, split), ["poller"], split)
    assert (
        "PollerFunction PollerPartsPolicy.StartPollParts: lambda:InvokeFunction on "
        + poller
        + (" is allowed but no call uses it")
        in problems
    )
    assert not any("CreateLogGroup" in p for p in problems)  # SAM's, and unusable: not reported
    assert not any("AWSLambdaBasicExecutionRole" in p for p in problems)  # the logs' platform calls
    assert not any("events:PutEvents" in p for p in problems)  # the poller's schedule can fail into it
    made = [Call("poller", "lambda:Invoke", (invoke,), environment=env)]
    assert not any("PollerPartsPolicy" in p for p in unused(made, ["poller"], split))
    # the SQS source's managed policy, used by Lambda's poller (platform_calls), reported otherwise
    consumer = unused([Call("consumer", "none", (), environment=env)], ["consumer"])
    assert any(
        p.startswith("ConsumerFunction AWSLambdaSQSQueueExecutionRole: sqs:ReceiveMessage") for p in consumer
    )
    assert not any(
        "AWSLambdaSQSQueueExecutionRole: sqs:" in p
        for p in unused(platform_calls("consumer", ENV), ["consumer"])
    )


def test_failed_invocations_reach_a_destination_only_where_they_can_happen() -> None:
    assert {
        f: invoked_asynchronously(load_template(), logical_id(f))
        for f in ("poller", "webhook", "consumer", "reconciler")
    } == {
        "poller": True,  # its schedule, and its parts
        "webhook": True,  # the ECR rule
        "consumer": False,  # Lambda's SQS poller invokes it synchronously
        "reconciler": True,  # its schedule
    }
    operations = {c.operation for c in platform_calls("consumer", ENV)}
    assert "lambda:OnFailure destination" not in operations
    assert "lambda:OnFailure destination" in {c.operation for c in platform_calls("reconciler", ENV)}
    # X-Ray only when traced: no statement without Tracing=Active, used by Lambda's traces with it
    assert not any(g.sid == "AWSXrayWriteOnlyAccess" for g in role("reconciler", ENV).statements)
    traced = {"Tracing": "Active"}
    assert any(g.sid == "AWSXrayWriteOnlyAccess" for g in role("reconciler", ENV, traced).statements)
    assert "lambda:tracing" in {c.operation for c in platform_calls("reconciler", ENV, traced)}
