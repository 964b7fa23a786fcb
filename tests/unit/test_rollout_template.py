"""template.yaml invariants of safe rollouts: the verifier, its delayed checks queue and its DLQ,
the rollout notification topic, least-privilege IAM.

Runtime, layers, timeout vs visibility timeout, partial batch failures and the environment of the
verifier are checked with every function's in tests/unit/test_template.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.template_support import (
    actions_of,
    events_of_type,
    function_props,
    resources,
    statements_for,
    template,  # noqa: F401 (the module fixture)
)

CHECKS_ARN = {"Fn::GetAtt": ["VerificationQueue", "Arn"]}
CHANGES_ARN = {"Fn::GetAtt": ["ChangesQueue", "Arn"]}


def test_verifier_consumes_the_checks_queue(template: dict[str, Any]) -> None:  # noqa: F811
    props = function_props(template, "VerifierFunction")
    (event,) = events_of_type(props, "SQS")
    assert event["Queue"] == CHECKS_ARN
    queue = resources(template)["VerificationQueue"]["Properties"]
    assert "FifoQueue" not in queue  # per-message DelaySeconds needs a standard queue
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["VerificationDeadLetterQueue", "Arn"]
    }
    dlq = resources(template)["VerificationDeadLetterQueue"]["Properties"]
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600 and dlq["SqsManagedSseEnabled"] is True
    alarm = resources(template)["VerificationDeadLetterAlarm"]["Properties"]
    assert alarm["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["VerificationDeadLetterQueue", "QueueName"]}


@pytest.mark.parametrize("fn", ["ConsumerFunction", "VerifierFunction"])
def test_rollout_permissions_are_scoped(template: dict[str, Any], fn: str) -> None:  # noqa: F811
    props = function_props(template, fn)
    (send,) = statements_for(props, "sqs:SendMessage")
    assert send["Resource"] == [CHECKS_ARN, CHANGES_ARN]
    (publish,) = statements_for(props, "sns:Publish")
    assert publish["Resource"] == {"Ref": "RolloutTopic"}
    # cluster credentials and notification webhooks, nothing else (tests/unit/test_template.py)
    (secrets,) = statements_for(props, "secretsmanager:GetSecretValue")
    assert [str(r["Fn::Sub"]).rsplit(":", 1)[1] for r in secrets["Resource"]] == [
        "tagpin/clusters/*",
        "tagpin/notifications/*",
    ]
    # the same secrets as SecureString parameters (SecretStore=ssm, the default)
    (parameters,) = [s for s in statements_for(props, "ssm:GetParameter") if s["Sid"] == secrets["Sid"]]
    assert [str(r["Fn::Sub"]).rsplit(":parameter", 1)[1] for r in parameters["Resource"]] == [
        "/tagpin/clusters/*",
        "/tagpin/notifications/*",
    ]
    if fn == "VerifierFunction":  # never deletes state; never touches the idempotency table
        assert "dynamodb:DeleteItem" not in actions_of(props)
        assert {s["Resource"]["Fn::GetAtt"][0] for s in statements_for(props, "dynamodb:GetItem")} == {
            "StateTable"
        }


def test_verifier_consumes_only_the_checks_queue(template: dict[str, Any]) -> None:  # noqa: F811
    props = function_props(template, "VerifierFunction")
    receive = statements_for(props, "sqs:ReceiveMessage")
    assert [s["Resource"] for s in receive] == [CHECKS_ARN]
    assert resources(template)["RolloutTopic"]["Properties"]["KmsMasterKeyId"] == "alias/aws/sns"
