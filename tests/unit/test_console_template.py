"""The console in template.yaml: only with an issuer (ConsoleJwtIssuer), on an HTTP API of its own
whose every route is in the OpenAPI body SAM generates (behind the JWT authorizer, but Slack's
button clicks), never a separate ``AWS::ApiGatewayV2`` resource: those are deleted by the next
stack update that changes the body (API Gateway re-imports it; aws/serverless-application-model
#1971). Checked on the template as written and on what SAM's transform makes of it
(tests/support/sam_transform.py). The integration waits as long as the function may run, the
function is invoked only by that API's routes, and its role is scoped to the state table, the
changes queue, its dead-letter queue and the configuration."""

from __future__ import annotations

from typing import Any

from tagpin.adapters.dynamodb.table import BY_TARGET
from tagpin_local.tables import STATE_ATTRIBUTES, STATE_INDEXES

from tests.support.sam_transform import transformed
from tests.unit.template_support import (
    evaluate,
    events_of_type,
    function_props,
    policy_statements,
    resources,
    template,  # noqa: F401 (the module fixture)
)

CONSOLE = ("ConsoleFunction", "ConsoleLogGroup", "ConsoleApi")
ROUTES = {("GET", "/console"), ("GET", "/console/{proxy+}"), ("POST", "/console/{proxy+}")}
SLACK_ROUTE = ("POST", "/slack/actions")  # Slack's button clicks: verified in code (no JWT from Slack)
ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Example"
# Resources that attach to an API from outside its OpenAPI body: none may exist.
OUTSIDE_THE_BODY = (
    "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Integration",
    "AWS::ApiGatewayV2::Authorizer",
    "AWS::ApiGatewayV2::Model",
    "AWS::ApiGatewayV2::RouteResponse",
    "AWS::ApiGatewayV2::IntegrationResponse",
)


def _unwrap(value: Any) -> Any:
    """The value of SAM's ``Fn::If [ConsoleEnabled, value, NoValue]`` wrappers."""
    while isinstance(value, dict) and set(value) == {"Fn::If"}:
        assert value["Fn::If"][0] == "ConsoleEnabled" and value["Fn::If"][2] == {"Ref": "AWS::NoValue"}
        value = value["Fn::If"][1]
    return value


def _operations(api: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    body = api["Properties"]["Body"]
    return {
        (method.upper(), path): _unwrap(operation)
        for path, item in body["paths"].items()
        for method, operation in _unwrap(item).items()
    }


def test_no_issuer_no_console(template):  # noqa: F811
    params = template["Parameters"]
    assert params["ConsoleJwtIssuer"]["Default"] == "" and params["ConsoleJwtAudience"]["Default"] == ""
    assert template["Conditions"]["ConsoleEnabled"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ConsoleJwtIssuer"}, ""]}]
    }
    for name in CONSOLE:
        assert resources(template)[name].get("Condition") == "ConsoleEnabled", name
    for name in ("ConsoleFunctionName", "ConsoleUrl", "SlackActionsUrl"):
        assert template["Outputs"][name]["Condition"] == "ConsoleEnabled"
    assert not evaluate(template, {"Condition": "ConsoleEnabled"}, {})
    assert evaluate(template, {"Condition": "ConsoleEnabled"}, {"ConsoleJwtIssuer": ISSUER})
    # what SAM generates for the console carries the condition too
    generated = transformed(ConsoleJwtIssuer=ISSUER)["Resources"]
    console = {k for k in generated if k.startswith("Console")}
    assert {"ConsoleApi", "ConsoleFunction", "ConsoleFunctionRole"} <= console
    assert {generated[k].get("Condition") for k in console} <= {"ConsoleEnabled", "ConsoleDetailed"}


def test_no_route_lives_outside_an_apis_body(template):  # noqa: F811
    for tpl in (template, transformed(ConsoleJwtIssuer=ISSUER)):
        outside = {k: v["Type"] for k, v in resources(tpl).items() if v["Type"] in OUTSIDE_THE_BODY}
        assert outside == {}


def test_every_console_route_is_in_its_apis_body_behind_the_jwt_authorizer(template):  # noqa: F811
    events = events_of_type(function_props(template, "ConsoleFunction"), "HttpApi")
    assert {e["ApiId"]["Ref"] for e in events} == {"ConsoleApi"}
    generated = transformed(ConsoleJwtIssuer=ISSUER, ConsoleJwtAudience="client-id")["Resources"]
    operations = _operations(generated["ConsoleApi"])
    assert set(operations) == ROUTES | {SLACK_ROUTE}
    for route in ROUTES:
        assert operations[route]["security"] == [{"ConsoleJwt": []}], route
    assert operations[SLACK_ROUTE]["security"] == [{"NONE": []}]  # SAM's "Authorizer: NONE"
    for route, operation in operations.items():
        integration = operation["x-amazon-apigateway-integration"]
        assert integration["type"] == "aws_proxy" and integration["payloadFormatVersion"] == "2.0", route
        assert "${ConsoleFunction.Arn}" in _unwrap(integration["uri"])["Fn::Sub"], route
    scheme = generated["ConsoleApi"]["Properties"]["Body"]["components"]["securitySchemes"]["ConsoleJwt"]
    authorizer = scheme["x-amazon-apigateway-authorizer"]
    assert authorizer["type"] == "jwt" and authorizer["identitySource"] == "$request.header.Authorization"
    assert authorizer["jwtConfiguration"] == {
        "issuer": {"Ref": "ConsoleJwtIssuer"},
        "audience": {"Ref": "ConsoleJwtAudience"},
    }
    # the webhook's API has the webhook's route alone, in its own body, without an authorizer
    webhook = _operations(generated["WebhookApi"])
    assert set(webhook) == {("POST", "/webhooks/{source}")}
    assert "security" not in webhook["POST", "/webhooks/{source}"]


def test_the_webhook_route_keeps_no_authorizer(template):  # noqa: F811
    (event,) = events_of_type(function_props(template, "WebhookFunction"), "HttpApi")
    assert "Auth" not in event
    api = resources(template)["WebhookApi"]["Properties"]
    assert "DefaultAuthorizer" not in api.get("Auth", {}) and "Authorizers" not in api.get("Auth", {})


def test_the_integration_waits_as_long_as_the_function_runs(template):  # noqa: F811
    timeout = function_props(template, "ConsoleFunction")["Timeout"]
    for event in events_of_type(function_props(template, "ConsoleFunction"), "HttpApi"):
        assert event["PayloadFormatVersion"] == "2.0"
        assert timeout * 1000 <= event["TimeoutInMillis"] <= 30_000


def test_only_the_console_apis_routes_may_invoke_it() -> None:
    generated = transformed(ConsoleJwtIssuer=ISSUER)["Resources"]
    permissions = [
        r["Properties"]
        for r in generated.values()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["FunctionName"] == {"Ref": "ConsoleFunction"}
    ]
    assert len(permissions) == len(ROUTES) + 1
    for permission in permissions:
        assert permission["Principal"] == "apigateway.amazonaws.com"
        source = permission["SourceArn"]["Fn::Sub"]
        text, variables = source if isinstance(source, list) else (source, {})
        assert "${__ApiId__}" in text and variables["__ApiId__"] == {"Ref": "ConsoleApi"}


def test_the_role_is_what_the_console_calls(template):  # noqa: F811
    props = function_props(template, "ConsoleFunction")
    granted = {
        (a, str(s["Resource"]))
        for s in policy_statements(props)
        for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    table, queue, dlq = (
        str({"Fn::GetAtt": [n, "Arn"]}) for n in ("StateTable", "ChangesQueue", "ChangesDeadLetterQueue")
    )
    expected = {
        *((f"dynamodb:{a}", table) for a in ("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem")),
        ("dynamodb:Query", str({"Fn::Sub": "${StateTable.Arn}/index/ByTarget"})),  # a target by its id
        ("sqs:SendMessage", queue),
        ("sns:Publish", str({"Ref": "RolloutTopic"})),  # a person's decision on an approval, announced
        *((f"sqs:{a}", dlq) for a in ("GetQueueAttributes", "ReceiveMessage", "ChangeMessageVisibility",
                                      "DeleteMessage")),
    }  # fmt: skip
    assert expected <= granted
    others = {
        g for g in granted if g not in expected and not g[0].startswith(("ssm:", "kms:", "secretsmanager:"))
    }
    assert others == set()  # nothing else: no cluster, no registry, no delete in the table
    # secrets: the notification secret only (tests/unit/test_template.py checks the kinds)


def test_the_state_tables_index_by_target_is_the_one_moto_gets(template):  # noqa: F811
    """The console looks a target up by id in the index ``ByTarget`` (only index entries carry
    ``target_id``): the template declares it as the local stack and the tests create it."""
    props = resources(template)["StateTable"]["Properties"]
    assert props["GlobalSecondaryIndexes"] == STATE_INDEXES
    assert [i["IndexName"] for i in STATE_INDEXES] == [BY_TARGET]
    assert props["AttributeDefinitions"] == [
        {"AttributeName": a, "AttributeType": "S"} for a in STATE_ATTRIBUTES
    ]
