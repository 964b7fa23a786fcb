"""template.yaml: the reconciler function, its schedule (with "off"), its permissions, the optional
EKS access entries.

Runtime, code, layers, timeout, environment and IAM wildcards of the reconciler are checked with
every function's in tests/unit/test_template.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.template_support import (
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


def _schedule(tpl: dict[str, Any]) -> dict[str, Any]:
    (event,) = events_of_type(function_props(tpl, "ReconcilerFunction"), "Schedule")
    return event


@pytest.mark.parametrize(
    ("schedule", "enabled"), [("rate(10 minutes)", True), ("cron(0/15 * * * ? *)", True), ("off", False)]
)
def test_reconcile_schedule_off_disables_the_rule(template, schedule, enabled):  # noqa: F811
    event = evaluate(template, _schedule(template), {"ReconcileSchedule": schedule})
    assert rule_enabled(event) is enabled
    assert str(event["Schedule"]).startswith(("rate(", "cron("))
    if enabled:
        assert event["Schedule"] == schedule
    assert evaluate(template, _schedule(template), {})["Schedule"] == "rate(10 minutes)"


def test_reconciler_permissions_are_least_privilege(template):  # noqa: F811
    props = function_props(template, "ReconcilerFunction")
    actions = actions_of(props)
    assert {
        "dynamodb:Query",
        "dynamodb:BatchWriteItem",
        "dynamodb:BatchGetItem",
        "sqs:SendMessage",
        "eks:DescribeCluster",
        "ssm:GetParameter",
        "secretsmanager:GetSecretValue",
    } <= actions
    # it neither consumes the queue nor touches the idempotency table, and never deletes an item
    # one by one (the index is rewritten with BatchWriteItem on the state table only)
    assert "sqs:ReceiveMessage" not in actions and "dynamodb:DeleteItem" not in actions
    # On Resource "*" only ECR's token (it cannot be scoped; every function's check enforces the list)
    for stmt in policy_statements(props):
        if "*" in as_list(stmt["Resource"]):
            assert as_list(stmt["Action"]) == ["ecr:GetAuthorizationToken"], stmt
    for stmt in statements_for(props, "dynamodb:BatchWriteItem"):
        assert stmt["Resource"] == {"Fn::GetAtt": ["StateTable", "Arn"]}


@pytest.mark.parametrize("fn", ["PollerFunction", "WebhookFunction", "ReconcilerFunction"])
def test_the_level_check_may_batch_read_target_states(template, fn):  # noqa: F811
    assert "dynamodb:BatchGetItem" in actions_of(function_props(template, fn))


def test_eks_access_entries_are_optional(template):  # noqa: F811
    entries = {k: v for k, v in resources(template).items() if v["Type"] == "AWS::EKS::AccessEntry"}
    assert set(entries) == {"ConsumerAccessEntry", "ReconcilerAccessEntry"}
    assert template["Conditions"]["HasEksAccessEntry"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "EksAccessEntryCluster"}, ""]}]
    }
    groups = {}
    for name, entry in entries.items():
        assert entry["Condition"] == "HasEksAccessEntry"
        props = entry["Properties"]
        assert props["ClusterName"] == {"Ref": "EksAccessEntryCluster"}
        assert props["PrincipalArn"] == {"Fn::GetAtt": [name.replace("AccessEntry", "FunctionRole"), "Arn"]}
        assert "AccessPolicies" not in props  # no AWS-managed policy: the RBAC in docs/rbac.yaml
        groups[name] = props["KubernetesGroups"]
    assert groups == {
        "ConsumerAccessEntry": ["tagpin-consumer"],
        "ReconcilerAccessEntry": ["tagpin-reconciler"],
    }
    assert template["Parameters"]["EksAccessEntryCluster"]["Default"] == ""
