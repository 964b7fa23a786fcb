"""The webhook's secret missing from Secrets Manager (``SecretStore=secretsmanager``): the webhook's
role is granted that one secret by its ARN (``secret:NAME-??????``, the 6 characters Secrets
Manager appends), so AWS answers the read of a secret that does not exist AccessDenied, not
ResourceNotFound. The webhook must still answer 503 "not configured yet", as documented, telling the
(unauthenticated) caller no more than that, with a log line that says which secret and what to
check. moto has no IAM: AWS's answer comes from the IAM model of
tests/support/iam.py (``iamenforce.enforcing``: the call is evaluated against the webhook's role
in template.yaml and denied as AWS denies it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from tagpin import wiring
from tagpin_local.lambda_runtime import LocalContext, http_api_event, load_handler

from tests.support.aws import create_table
from tests.support.constants import DISTRIBUTION_V1, REGION, WEBHOOK_TOKEN
from tests.support.iam import Request, secret_arn
from tests.support.iamenforce import enforcing
from tests.support.iamroles import role

SECRETS_MANAGER = {"SecretStore": "secretsmanager"}
NAME = "tagpin/webhook"


@pytest.fixture
def handler(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    create_table(boto3.client("dynamodb", region_name=REGION), "tagpin-state", ("pk", "sk"))
    queue = boto3.client("sqs", region_name=REGION).create_queue(
        QueueName="tagpin-changes.fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name="/tagpin/config", Value="images: []\n", Type="String"
    )
    for name, value in {
        "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
        "TAGPIN_STATE_TABLE": "tagpin-state",
        "TAGPIN_QUEUE_URL": queue,
        "TAGPIN_NOTIFICATIONS_QUEUE_URL": boto3.client("sqs", region_name=REGION).create_queue(
            QueueName="tagpin-notifications"
        )["QueueUrl"],
        "TAGPIN_WEBHOOK_SECRET": NAME,
        "TAGPIN_SECRET_STORE": "secretsmanager",
        "POWERTOOLS_SERVICE_NAME": "webhook",
        "POWERTOOLS_METRICS_DISABLED": "1",
    }.items():
        monkeypatch.setenv(name, value)
    wiring.reset()
    yield load_handler("webhook")
    wiring.reset()


def post(handler: Any) -> tuple[int, dict[str, Any]]:
    event = http_api_event(
        "POST",
        "/webhooks/distribution",
        "",
        {"authorization": f"Bearer {WEBHOOK_TOKEN}", "content-type": DISTRIBUTION_V1},
        json.dumps({"events": []}).encode(),
        "192.0.2.1",
        "POST /webhooks/{source}",
    )
    response = handler(event, LocalContext("tagpin-webhook", timeout_s=15))
    return int(response["statusCode"]), json.loads(response["body"])


def test_aws_denies_the_read_of_a_webhook_secret_that_does_not_exist() -> None:
    """The IAM model: the role allows the secret's ARN (with its suffix), not the bare name's."""
    env = {
        "TAGPIN_WEBHOOK_SECRET": NAME,
        "TAGPIN_SECRET_STORE": "secretsmanager",
        "TAGPIN_CONFIG_PARAMETER": "/c",
    }
    webhook = role("webhook", env, SECRETS_MANAGER)
    assert webhook.allowed(Request("secretsmanager:GetSecretValue", secret_arn(NAME, REGION)))
    missing = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:{NAME}"
    assert not webhook.allowed(Request("secretsmanager:GetSecretValue", missing))


def test_a_denied_missing_secret_is_a_503_with_a_clear_log_line(
    handler: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    with enforcing(SECRETS_MANAGER) as denials:
        status, body = post(handler)
    missing = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:{NAME}"  # no suffix: no such secret
    assert denials == [f"webhook: secretsmanager:GetSecretValue on {missing}"]
    assert status == 503
    assert body == {
        "error": "tagpin is not configured yet: the webhook secret is missing or not readable "
        "(docs/deploying.md)"
    }  # neither its name nor how the role is granted it
    captured = capfd.readouterr()  # the function's log: stdout, or the local runtime's stderr
    output = captured.out + captured.err
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    (logged,) = [line for line in lines if line.get("message") == "webhook before configuration"]
    assert logged["level"] == "WARNING"
    assert logged["reason"].startswith(
        f"the webhook secret {NAME}: the Secrets Manager secret {NAME} is not readable: AccessDenied"
    )
    assert "does not exist" in logged["reason"] and "let the webhook's role read it" in logged["reason"]


def test_once_the_secret_exists_the_same_role_reads_it(handler: Any) -> None:
    boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name=NAME, SecretString=json.dumps({"distribution": WEBHOOK_TOKEN})
    )
    with enforcing(SECRETS_MANAGER) as denials:
        status, _ = post(handler)
    assert denials == [] and status == 202


def test_a_denied_write_is_refused_before_it_is_made(handler: Any) -> None:
    """IAM authorises before the service acts: the model refuses a write the role does not allow
    before moto sees it, so nothing is written (the webhook may write its state table only)."""
    from botocore.exceptions import ClientError
    from tagpin_local.lambda_runtime import INVOKED

    dynamodb = boto3.client("dynamodb", region_name=REGION)
    create_table(dynamodb, "tagpin-other", ("pk", "sk"))
    item = {"pk": {"S": "x"}, "sk": {"S": "y"}}
    token = INVOKED.set("webhook")
    try:
        with enforcing(SECRETS_MANAGER) as denials, pytest.raises(ClientError) as info:
            dynamodb.put_item(TableName="tagpin-other", Item=item)
        dynamodb.put_item(TableName="tagpin-state", Item=item)  # its own table: allowed, written
    finally:
        INVOKED.reset(token)
    assert info.value.response["Error"]["Code"] == "AccessDeniedException"
    assert denials == [
        f"webhook: dynamodb:PutItem on arn:aws:dynamodb:{REGION}:123456789012:table/tagpin-other"
    ]
    assert dynamodb.scan(TableName="tagpin-other")["Items"] == []
    assert len(dynamodb.scan(TableName="tagpin-state")["Items"]) == 1
