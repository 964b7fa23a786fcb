"""template.yaml invariants of safe rollouts: the consumer follows rollouts through delayed
verifications on the one changes queue (no second queue, no second event source polled around
the clock), the rollout notification topic, least-privilege IAM.

Runtime, layers, timeout vs visibility timeout, partial batch failures and the environment of the
consumer are checked with every function's in tests/unit/test_template.py."""

from __future__ import annotations

from typing import Any

from tagpin.domain.redelivery import RECEIVES

from tests.unit.template_support import (
    FUNCTIONS,
    actions_of,
    events_of_type,
    function_props,
    resources,
    statements_for,
    template,  # noqa: F401 (the module fixture)
)

CHANGES_ARN = {"Fn::GetAtt": ["ChangesQueue", "Arn"]}


def test_one_queue_is_read_by_one_function(template: dict[str, Any]) -> None:  # noqa: F811
    """Each queue an event source reads costs about $0.33 a month idle (docs/cost.md): two in a
    default stack (the changes queue; the notifications queue, which lets the webhook answer a
    registry once a notification is queued: docs/webhooks.md); a third, the write-back queue, only
    with GitWriteBack=enabled."""
    res = resources(template)
    sources = [
        (name, event["Queue"], res[name].get("Condition"))
        for name in FUNCTIONS
        for event in events_of_type(function_props(template, name), "SQS")
    ]
    assert sources == [
        ("WebhookFunction", {"Fn::GetAtt": ["NotificationsQueue", "Arn"]}, None),
        ("ConsumerFunction", CHANGES_ARN, None),
        ("WriteBackFunction", {"Fn::GetAtt": ["WriteBackQueue", "Arn"]}, "WriteBackEnabled"),
    ]
    queues = [k for k, v in res.items() if v["Type"] == "AWS::SQS::Queue" and "Condition" not in v]
    assert sorted(queues) == [
        "ChangesDeadLetterQueue",
        "ChangesQueue",
        "EventsDeadLetterQueue",
        "NotificationsDeadLetterQueue",
        "NotificationsQueue",
    ]
    optional = [k for k, v in res.items() if v["Type"] == "AWS::SQS::Queue" and "Condition" in v]
    assert sorted(optional) == ["WriteBackDeadLetterQueue", "WriteBackQueue"]
    assert template["Parameters"]["GitWriteBack"]["Default"] == "disabled"
    queue = resources(template)["ChangesQueue"]["Properties"]
    assert queue["FifoQueue"] is True
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": ["ChangesDeadLetterQueue", "Arn"]},
        "maxReceiveCount": RECEIVES,
    }
    dlq = resources(template)["ChangesDeadLetterQueue"]["Properties"]
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600 and dlq["SqsManagedSseEnabled"] is True
    alarm = resources(template)["ChangesDeadLetterAlarm"]
    assert "Condition" not in alarm
    assert alarm["Properties"]["Dimensions"][0]["Value"] == {
        "Fn::GetAtt": ["ChangesDeadLetterQueue", "QueueName"]
    }


def test_rollout_permissions_are_scoped(template: dict[str, Any]) -> None:  # noqa: F811
    props = function_props(template, "ConsumerFunction")
    send, writes = statements_for(props, "sqs:SendMessage")  # writes: GitWriteBack=enabled only
    assert send["Resource"] == CHANGES_ARN and writes["Resource"] == {"Fn::GetAtt": ["WriteBackQueue", "Arn"]}
    # hides a verification received early until it is due, sets a failed record's next attempt
    (receive,) = statements_for(props, "sqs:ReceiveMessage")
    assert "sqs:ChangeMessageVisibility" in receive["Action"] and receive["Resource"] == CHANGES_ARN
    (publish,) = statements_for(props, "sns:Publish")
    assert publish["Resource"] == {"Ref": "RolloutTopic"}
    # registry credentials (the trust gates read registries), cluster credentials, notification
    # webhooks and signature keys, nothing else (tests/unit/test_template.py)
    (secrets,) = statements_for(props, "secretsmanager:GetSecretValue")
    assert [str(r["Fn::Sub"]).rsplit(":", 1)[1] for r in secrets["Resource"]] == [
        "tagpin/registries/*",
        "tagpin/clusters/*",
        "tagpin/notifications/*",
        "tagpin/signing/*",
    ]
    # the same secrets as SecureString parameters (SecretStore=ssm, the default)
    (parameters,) = [s for s in statements_for(props, "ssm:GetParameter") if s["Sid"] == secrets["Sid"]]
    assert [str(r["Fn::Sub"]).rsplit(":parameter", 1)[1] for r in parameters["Resource"]] == [
        "/tagpin/registries/*",
        "/tagpin/clusters/*",
        "/tagpin/notifications/*",
        "/tagpin/signing/*",
    ]
    # never deletes state (the idempotency table's records only)
    deletes = statements_for(props, "dynamodb:DeleteItem")
    assert [s["Resource"] for s in deletes] == [{"Fn::GetAtt": ["IdempotencyTable", "Arn"]}]
    assert "dynamodb:DeleteTable" not in actions_of(props)
    assert resources(template)["RolloutTopic"]["Properties"]["KmsMasterKeyId"] == "alias/aws/sns"
