"""What a first deployment gets, read off what SAM's real transform makes of template.yaml
(tests/support/sam_transform.py) for a parameter set: each role holds what its function uses and no
more (X-Ray only when traced, events:PutEvents only where asynchronous invocations can fail,
sts:AssumeRole on the registry roles given and no other), the consumer's queue never starts more
batches than the consumer has reserved, and the webhook route's throttle is a parameter."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.sam_transform import transformed
from tests.unit.template_support import evaluate, function_props, resources, template  # noqa: F401

XRAY = "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"
FUNCTIONS = ("PollerFunction", "WebhookFunction", "ConsumerFunction", "ReconcilerFunction", "ConsoleFunction")
ASYNCHRONOUS = {"PollerFunction", "WebhookFunction", "ReconcilerFunction"}  # schedules, the ECR rule
ISSUER = {"ConsoleJwtIssuer": "https://issuer.example"}  # every function deployed


def _role(generated: dict[str, Any], function: str) -> dict[str, Any]:
    role: dict[str, Any] = generated["Resources"][f"{function}Role"]["Properties"]
    return role


def _role_statements(generated: dict[str, Any], function: str) -> list[dict[str, Any]]:
    """The statements of the role's inline policies, both branches of an Fn::If."""
    found: list[dict[str, Any]] = []

    def add(value: Any) -> None:
        if isinstance(value, dict) and set(value) == {"Fn::If"}:
            add(value["Fn::If"][1])
            add(value["Fn::If"][2])
        elif isinstance(value, list):
            for item in value:
                add(item)
        elif isinstance(value, dict) and "Effect" in value:
            found.append(value)

    for policy in _role(generated, function).get("Policies", []):
        add(policy["PolicyDocument"]["Statement"])
    return found


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def test_xray_only_when_traced() -> None:
    untraced = transformed(**ISSUER)
    for function in FUNCTIONS:
        assert XRAY not in _role(untraced, function)["ManagedPolicyArns"], function
        assert "TracingConfig" not in untraced["Resources"][function]["Properties"], function
    traced = transformed(**ISSUER, Tracing="Active")
    for function in FUNCTIONS:
        assert XRAY in _role(traced, function)["ManagedPolicyArns"], function
        assert traced["Resources"][function]["Properties"]["TracingConfig"] == {"Mode": {"Ref": "Tracing"}}


def test_events_put_events_only_for_functions_invoked_asynchronously() -> None:
    generated = transformed(**ISSUER)
    putting = {
        function
        for function in FUNCTIONS
        if any("events:PutEvents" in _actions(s) for s in _role_statements(generated, function))
    }
    assert putting == ASYNCHRONOUS
    configs = {
        r["Properties"]["FunctionName"]["Ref"]
        for r in generated["Resources"].values()
        if r["Type"] == "AWS::Lambda::EventInvokeConfig"
    }
    assert configs == ASYNCHRONOUS


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        ("", set()),
        (
            "arn:aws:iam::111122223333:role/tagpin-registry-pull,arn:aws:iam::444455556666:role/tagpin-registry-*",
            {
                "arn:aws:iam::111122223333:role/tagpin-registry-pull",
                "arn:aws:iam::444455556666:role/tagpin-registry-*",
            },
        ),
    ],
)
def test_registry_roles_are_only_those_given(roles: str, expected: set[str], template: Any) -> None:  # noqa: F811
    generated = transformed(**ISSUER, RegistryRoleArns=roles)
    readers = ("PollerFunction", "WebhookFunction", "ConsumerFunction", "ReconcilerFunction")
    for function in FUNCTIONS:
        for statement in _role_statements(generated, function):
            if "sts:AssumeRole" not in _actions(statement):
                continue
            resource = statement["Resource"]
            assert "iam::*:" not in str(resource), f"{function}: sts:AssumeRole in any account"
            assert resource in ({"Ref": "RegistryRoleArns"}, {"Ref": "ClusterRoleArns"}), function
        # what CloudFormation makes of it for these parameters
        granted = {
            arn
            for s in _role_statements(generated, function)
            if "sts:AssumeRole" in _actions(s) and s["Resource"] == {"Ref": "RegistryRoleArns"}
            for arn in (
                evaluate(
                    template,
                    {"Fn::If": ["HasRegistryRoles", s, {"Ref": "AWS::NoValue"}]},
                    {"RegistryRoleArns": roles},
                )
                or {}
            ).get("Resource", [])
            if arn
        }
        assert granted == (expected if function in readers else set()), function


@pytest.mark.parametrize(
    ("reserved", "maximum", "effective"),
    [("0", "5", "5"), ("3", "5", "3"), ("50", "5", "50"), ("5", "5", "5"), ("0", "1000", "1000")],
)
def test_the_queue_never_starts_more_batches_than_the_consumer_has_reserved(
    template: Any,  # noqa: F811
    reserved: str,
    maximum: str,
    effective: str,
) -> None:
    (event,) = [
        e for e in function_props(template, "ConsumerFunction")["Events"].values() if e["Type"] == "SQS"
    ]
    params = {"ConsumerReservedConcurrency": reserved, "ConsumerMaxConcurrency": maximum}
    assert evaluate(template, event["Properties"]["ScalingConfig"]["MaximumConcurrency"], params) == effective
    reservation = evaluate(
        template, function_props(template, "ConsumerFunction")["ReservedConcurrentExecutions"], params
    )
    if reserved == "0":
        assert reservation == {"Ref": "AWS::NoValue"}
    else:
        assert reservation == reserved and int(effective) <= int(reserved)
    generated = transformed(**params)
    (mapping,) = [
        r
        for r in generated["Resources"].values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
        and r["Properties"]["FunctionName"] == {"Ref": "ConsumerFunction"}
    ]
    assert mapping["Properties"]["ScalingConfig"] == event["Properties"]["ScalingConfig"]


def test_a_reservation_of_one_is_refused_before_anything_is_deployed(template: Any) -> None:  # noqa: F811
    (assertion,) = template["Rules"]["ConsumerReservationRunsItsQueue"]["Assertions"]
    assert assertion["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "ConsumerReservedConcurrency"}, "1"]}]}
    for value, allowed in (("0", True), ("1", False), ("2", True), ("10", True)):
        assert evaluate(template, assertion["Assert"], {"ConsumerReservedConcurrency": value}) is allowed
    assert "Rules" in transformed()  # SAM keeps the rule for CloudFormation
    described = template["Parameters"]["ConsumerReservedConcurrency"]["Description"]
    assert "quota is 10" in described and "L-B99A9384" in described and "tagpin doctor" in described


def test_the_webhook_throttle_is_a_parameter_saying_what_happens_above_it(template: Any) -> None:  # noqa: F811
    api = resources(template)["WebhookApi"]["Properties"]["DefaultRouteSettings"]
    assert api == {
        "ThrottlingBurstLimit": {"Ref": "WebhookThrottleBurstLimit"},
        "ThrottlingRateLimit": {"Ref": "WebhookThrottleRateLimit"},
    }
    params = template["Parameters"]
    # safe defaults: above the 20/s and 50 at once that dropped bursts of senders that do not retry
    assert params["WebhookThrottleRateLimit"]["Default"] > 20
    assert params["WebhookThrottleBurstLimit"]["Default"] > 50
    said = params["WebhookThrottleRateLimit"]["Description"]
    assert "429" in said and "GitHub" in said and "next poll" in said
    stage = transformed()["Resources"]["WebhookApiApiGatewayDefaultStage"]["Properties"]
    assert stage["DefaultRouteSettings"] == api


def test_a_console_issuer_without_an_audience_is_refused_before_anything_is_deployed(
    template: Any,  # noqa: F811
) -> None:
    """With ``ConsoleJwtIssuer`` set and ``ConsoleJwtAudience`` left at its default, the JWT
    authorizer would get the audience ``[""]`` and refuse every person's token (audit-iam)."""
    rule = template["Rules"]["ConsoleAudienceWithItsIssuer"]
    (assertion,) = rule["Assertions"]
    issuer = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc"
    for params, applies, allowed in (
        ({}, False, False),  # no console: the rule does not apply
        ({"ConsoleJwtIssuer": issuer}, True, False),  # an issuer, the audience left empty
        ({"ConsoleJwtIssuer": issuer, "ConsoleJwtAudience": "client-1,"}, True, False),  # one empty
        ({"ConsoleJwtIssuer": issuer, "ConsoleJwtAudience": "client-1"}, True, True),
        ({"ConsoleJwtIssuer": issuer, "ConsoleJwtAudience": "client-1,client-2"}, True, True),
    ):
        assert evaluate(template, rule["RuleCondition"], params) is applies
        assert evaluate(template, assertion["Assert"], params) is allowed
