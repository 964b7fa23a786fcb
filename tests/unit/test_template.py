"""Static checks of template.yaml that cfn-lint does not make for SAM resources.

cfn-lint E3505 (visibility timeout vs function timeout) fires on raw CloudFormation but
not on a SAM ``Events: SQS`` source, so the invariants tagpin relies on are asserted here
on the template as written (Globals resolved the way SAM resolves them).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.template_support import (
    TEMPLATE,
    UNSCOPABLE_ACTIONS,
    actions_of,
    as_list,
    evaluate,
    events_of_type,
    function_props,
    policy_statements,
    resources,
    rule_enabled,
    statements_for,
    template,  # noqa: F401 (the module fixture)
)

FUNCTIONS = ("PollerFunction", "WebhookFunction", "ConsumerFunction")
PRODUCERS = ("PollerFunction", "WebhookFunction")


# --------------------------------------------------------------------------- runtime, layers
def test_functions_use_python313_x86_64(template: dict[str, Any]) -> None:  # noqa: F811
    for fn in FUNCTIONS:
        props = function_props(template, fn)
        assert props["Runtime"] == "python3.13", fn
        assert props["Architectures"] == ["x86_64"], fn
        assert props["Handler"] == "app.lambda_handler", fn
        assert props["CodeUri"] == f"functions/{fn.removesuffix('Function').lower()}/", fn


def test_layers_are_built_with_makefile_for_python313(template: dict[str, Any]) -> None:  # noqa: F811
    for layer, uri in (("CommonLayer", "layers/common/"), ("KubernetesLayer", "layers/kubernetes/")):
        res = resources(template)[layer]
        assert res["Type"] == "AWS::Serverless::LayerVersion"
        assert res["Properties"]["ContentUri"] == uri
        assert res["Properties"]["CompatibleRuntimes"] == ["python3.13"]
        assert res["Metadata"]["BuildMethod"] == "makefile"
        makefile = TEMPLATE.parent / uri / "Makefile"
        text = makefile.read_text(encoding="utf-8")
        assert f"build-{layer}:" in text
        assert "--invalidation-mode unchecked-hash" in text
        assert "python3.13" in text


def test_producers_get_only_the_common_layer(template: dict[str, Any]) -> None:  # noqa: F811
    assert "Layers" not in template.get("Globals", {}).get("Function", {}), "layers are per function"
    for fn in PRODUCERS:
        assert function_props(template, fn)["Layers"] == [{"Ref": "CommonLayer"}], fn


def test_consumer_gets_common_then_kubernetes_layer(template: dict[str, Any]) -> None:  # noqa: F811
    # order matters: the kubernetes layer relies on pydantic & co. from the common layer
    assert function_props(template, "ConsumerFunction")["Layers"] == [
        {"Ref": "CommonLayer"},
        {"Ref": "KubernetesLayer"},
    ]


def test_timeouts_and_memory(template: dict[str, Any]) -> None:  # noqa: F811
    assert function_props(template, "PollerFunction")["Timeout"] == 300
    assert function_props(template, "WebhookFunction")["Timeout"] == 15
    consumer = function_props(template, "ConsumerFunction")
    assert consumer["Timeout"] == 60
    assert consumer["MemorySize"] >= 512


def test_environment_contract(template: dict[str, Any]) -> None:  # noqa: F811
    common = {
        "TAGPIN_CONFIG_PARAMETER": {"Ref": "ConfigParameterName"},
        "TAGPIN_STATE_TABLE": {"Ref": "StateTable"},
        "POWERTOOLS_METRICS_NAMESPACE": "tagpin",
        "POWERTOOLS_LOG_LEVEL": {"Ref": "LogLevel"},
    }
    expected = {
        "PollerFunction": {"POWERTOOLS_SERVICE_NAME": "poller", "TAGPIN_QUEUE_URL": {"Ref": "ChangesQueue"}},
        "WebhookFunction": {
            "POWERTOOLS_SERVICE_NAME": "webhook",
            "TAGPIN_QUEUE_URL": {"Ref": "ChangesQueue"},
            "TAGPIN_WEBHOOK_SECRET": {"Ref": "WebhookSecretName"},
        },
        "ConsumerFunction": {
            "POWERTOOLS_SERVICE_NAME": "consumer",
            "TAGPIN_IDEMPOTENCY_TABLE": {"Ref": "IdempotencyTable"},
            "TAGPIN_QUEUE_URL": {"Ref": "ChangesQueue"},
            "TAGPIN_VERIFICATION_QUEUE_URL": {"Ref": "VerificationQueue"},
            "TAGPIN_NOTIFY_TOPIC_ARN": {"Ref": "RolloutTopic"},
        },
    }
    for fn, own in expected.items():
        env = function_props(template, fn)["Environment"]["Variables"]
        assert env == common | own, fn
    params = template["Parameters"]
    assert params["ConfigParameterName"]["Default"] == "/tagpin/config"
    assert params["WebhookSecretName"]["Default"] == "tagpin/webhook"
    assert params["PollSchedule"]["Default"] == "rate(5 minutes)"


# --------------------------------------------------------------------------- queue + SQS event
def sqs_event(template: dict[str, Any]) -> dict[str, Any]:  # noqa: F811
    (event,) = events_of_type(function_props(template, "ConsumerFunction"), "SQS")
    return event


def test_visibility_timeout_covers_six_consumer_timeouts(template: dict[str, Any]) -> None:  # noqa: F811
    assert sqs_event(template)["Queue"] == {"Fn::GetAtt": ["ChangesQueue", "Arn"]}
    queue = resources(template)["ChangesQueue"]["Properties"]
    timeout = function_props(template, "ConsumerFunction")["Timeout"]
    assert queue["VisibilityTimeout"] >= 6 * timeout


def test_sqs_event_reports_batch_item_failures(template: dict[str, Any]) -> None:  # noqa: F811
    event = sqs_event(template)
    assert event.get("FunctionResponseTypes") == ["ReportBatchItemFailures"]
    assert event["BatchSize"] == 10  # FIFO maximum
    assert "MaximumBatchingWindowInSeconds" not in event  # not allowed on FIFO sources
    assert "MaximumConcurrency" in event["ScalingConfig"]
    low = evaluate(template, event["ScalingConfig"]["MaximumConcurrency"], {})
    assert int(low) >= 2


def test_fifo_queue_settings(template: dict[str, Any]) -> None:  # noqa: F811
    queue = resources(template)["ChangesQueue"]
    assert queue["Type"] == "AWS::SQS::Queue"
    props = queue["Properties"]
    assert props["FifoQueue"] is True
    assert props["ContentBasedDeduplication"] is False  # producers set MessageDeduplicationId
    assert props["DeduplicationScope"] == "messageGroup"
    assert props["FifoThroughputLimit"] == "perMessageGroupId"
    assert props.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in props
    if "QueueName" in props:
        assert str(props["QueueName"]["Fn::Sub"]).endswith(".fifo")


def test_redrive_to_fifo_dead_letter_queue(template: dict[str, Any]) -> None:  # noqa: F811
    redrive = resources(template)["ChangesQueue"]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["ChangesDeadLetterQueue", "Arn"]}
    assert redrive["maxReceiveCount"] == 5
    dlq = resources(template)["ChangesDeadLetterQueue"]
    assert dlq["Type"] == "AWS::SQS::Queue"
    props = dlq["Properties"]
    assert props["FifoQueue"] is True  # a FIFO source needs a FIFO DLQ
    assert props["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert props.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in props
    if "QueueName" in props:
        assert str(props["QueueName"]["Fn::Sub"]).endswith(".fifo")


# --------------------------------------------------------------------------- schedule
def schedule_event(template: dict[str, Any]) -> dict[str, Any]:  # noqa: F811
    (event,) = events_of_type(function_props(template, "PollerFunction"), "Schedule")
    return event


def test_poll_schedule_condition_wiring(template: dict[str, Any]) -> None:  # noqa: F811
    assert template["Conditions"]["PollingEnabled"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "PollSchedule"}, "off"]}]
    }
    event = schedule_event(template)
    state = event.get("State", event.get("Enabled"))
    assert isinstance(state, dict) and state["Fn::If"][0] == "PollingEnabled"


@pytest.mark.parametrize(
    ("schedule", "enabled"),
    [("rate(5 minutes)", True), ("cron(0/10 * * * ? *)", True), ("off", False)],
)
def test_poll_schedule_off_disables_the_rule(template: dict[str, Any], schedule: str, enabled: bool) -> None:  # noqa: F811
    event = evaluate(template, schedule_event(template), {"PollSchedule": schedule})
    assert rule_enabled(event) is enabled
    # the rule always gets a syntactically valid expression ("off" is not one)
    assert str(event["Schedule"]).startswith(("rate(", "cron("))
    if enabled:
        assert event["Schedule"] == schedule


def test_default_schedule_polls(template: dict[str, Any]) -> None:  # noqa: F811
    event = evaluate(template, schedule_event(template), {})
    assert rule_enabled(event)
    assert event["Schedule"] == "rate(5 minutes)"


# --------------------------------------------------------------------------- webhook
def test_webhook_route(template: dict[str, Any]) -> None:  # noqa: F811
    assert resources(template)["WebhookApi"]["Type"] == "AWS::Serverless::HttpApi"
    (event,) = events_of_type(function_props(template, "WebhookFunction"), "HttpApi")
    assert event["ApiId"] == {"Ref": "WebhookApi"}
    assert event["Method"] == "POST"
    assert event["Path"] == "/webhooks/{source}"


# --------------------------------------------------------------------------- tables
def test_state_table(template: dict[str, Any]) -> None:  # noqa: F811
    props = resources(template)["StateTable"]["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert {"AttributeName": "pk", "AttributeType": "S"} in props["AttributeDefinitions"]
    assert {"AttributeName": "sk", "AttributeType": "S"} in props["AttributeDefinitions"]
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True


def test_idempotency_table_has_ttl(template: dict[str, Any]) -> None:  # noqa: F811
    props = resources(template)["IdempotencyTable"]["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": "id", "AttributeType": "S"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}


# --------------------------------------------------------------------------- IAM
@pytest.mark.parametrize("fn", FUNCTIONS)
def test_no_wildcard_resources_or_actions(template: dict[str, Any], fn: str) -> None:  # noqa: F811
    for stmt in policy_statements(function_props(template, fn)):
        actions = as_list(stmt["Action"])
        assert all(a != "*" and not a.endswith(":*") for a in actions), stmt
        if "*" in as_list(stmt["Resource"]):
            assert set(actions) <= UNSCOPABLE_ACTIONS, f"{fn}: Resource '*' for {actions}"


def test_producer_permissions(template: dict[str, Any]) -> None:  # noqa: F811
    for fn in PRODUCERS:
        props = function_props(template, fn)
        actions = actions_of(props)
        assert {
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "sqs:SendMessage",
            "ssm:GetParameter",
            "secretsmanager:GetSecretValue",
        } <= actions, fn
        # producers never delete, never consume, never touch clusters or the idempotency table
        assert not {a for a in actions if a.startswith("eks:")}, fn
        assert "dynamodb:DeleteItem" not in actions, fn
        assert "sqs:ReceiveMessage" not in actions, fn
        for stmt in statements_for(props, "dynamodb:PutItem"):
            assert stmt["Resource"] == {"Fn::GetAtt": ["StateTable", "Arn"]}, fn
        for stmt in statements_for(props, "sqs:SendMessage"):
            assert stmt["Resource"] == {"Fn::GetAtt": ["ChangesQueue", "Arn"]}, fn
    webhook = function_props(template, "WebhookFunction")
    secrets = [str(s["Resource"]) for s in statements_for(webhook, "secretsmanager:GetSecretValue")]
    assert any("${WebhookSecretName}" in r for r in secrets)


def test_consumer_permissions(template: dict[str, Any]) -> None:  # noqa: F811
    props = function_props(template, "ConsumerFunction")
    actions = actions_of(props)
    assert {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "ssm:GetParameter",
        "secretsmanager:GetSecretValue",
        "eks:DescribeCluster",
    } <= actions
    # sends only delayed rollout checks and a promotion's next wave (tests/unit/test_rollout_template.py)
    (send,) = statements_for(props, "sqs:SendMessage")
    assert send["Resource"] == [
        {"Fn::GetAtt": ["VerificationQueue", "Arn"]},
        {"Fn::GetAtt": ["ChangesQueue", "Arn"]},
    ]
    # cross-account clusters: only the role ARNs given as a parameter, only when given
    (assume,) = statements_for(props, "sts:AssumeRole")
    assert assume["Resource"] == {"Ref": "ClusterRoleArns"}
    (stmt,) = [s for s in props["Policies"][0]["Statement"] if "Fn::If" in s and assume in s["Fn::If"]]
    assert stmt["Fn::If"][0] == "HasClusterRoles"
    assert evaluate(template, stmt, {"ClusterRoleArns": ""}) == {"Ref": "AWS::NoValue"}
    role = "arn:aws:iam::111122223333:role/tagpin-deployer"
    assert evaluate(template, stmt, {"ClusterRoleArns": role})["Resource"] == [role]
    (eks,) = statements_for(props, "eks:DescribeCluster")
    assert eks["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:eks:*:${AWS::AccountId}:cluster/*"}
    idem_arn = {"Fn::GetAtt": ["IdempotencyTable", "Arn"]}
    idem = [s for s in policy_statements(props) if s["Resource"] == idem_arn]
    assert idem and {a for s in idem for a in as_list(s["Action"])} == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    }


def test_config_parameter_arn_is_scoped(template: dict[str, Any]) -> None:  # noqa: F811
    for fn in FUNCTIONS:
        (stmt,) = statements_for(function_props(template, fn), "ssm:GetParameter")
        assert stmt["Resource"]["Fn::Sub"].endswith(":parameter${ConfigParameterName}"), fn
    # the ARN above is only right for names with a leading slash
    assert template["Parameters"]["ConfigParameterName"]["AllowedPattern"].startswith("^/")


# --------------------------------------------------------------------------- outputs
def test_outputs(template: dict[str, Any]) -> None:  # noqa: F811
    outputs = template["Outputs"]
    for name in (
        "WebhookUrl",
        "ChangesQueueUrl",
        "StateTableName",
        "IdempotencyTableName",
        "PollerFunctionName",
        "WebhookFunctionName",
        "ConsumerFunctionName",
    ):
        assert name in outputs
