"""The console in template.yaml: only with an issuer (ConsoleJwtIssuer), every route behind the JWT
authorizer on the webhook's HTTP API, the webhook's route without one, an integration that waits as
long as the function may run, invoked only by that API's console routes, and a role scoped to the
state table, the changes queue, its dead-letter queue and the configuration."""

from __future__ import annotations

from typing import Any

from tagpin.adapters.dynamodb.table import BY_TARGET
from tagpin_local.tables import STATE_ATTRIBUTES, STATE_INDEXES

from tests.unit.template_support import (
    evaluate,
    events_of_type,
    function_props,
    policy_statements,
    resources,
    template,  # noqa: F401 (the module fixture)
)

CONSOLE = (
    "ConsoleFunction", "ConsoleLogGroup", "ConsoleJwtAuthorizer", "ConsoleIntegration", "ConsoleRoot",
    "ConsolePages", "ConsoleActions", "ConsoleInvokePermission", "SlackActions",
    "SlackActionsInvokePermission",
)  # fmt: skip
ROUTES = {"GET /console", "GET /console/{proxy+}", "POST /console/{proxy+}"}
SLACK_ROUTE = "POST /slack/actions"  # Slack's button clicks: verified in code (no JWT from Slack)


def _routes(tpl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in resources(tpl).items() if v["Type"] == "AWS::ApiGatewayV2::Route"}


def test_no_issuer_no_console(template):  # noqa: F811
    params = template["Parameters"]
    assert params["ConsoleJwtIssuer"]["Default"] == "" and params["ConsoleJwtAudience"]["Default"] == ""
    assert template["Conditions"]["ConsoleEnabled"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ConsoleJwtIssuer"}, ""]}]
    }
    for name in CONSOLE:
        assert resources(template)[name].get("Condition") == "ConsoleEnabled", name
    for name in ("ConsoleFunctionName", "ConsoleUrl"):
        assert template["Outputs"][name]["Condition"] == "ConsoleEnabled"
    assert not evaluate(template, {"Condition": "ConsoleEnabled"}, {})
    assert evaluate(template, {"Condition": "ConsoleEnabled"}, {"ConsoleJwtIssuer": "https://issuer.example"})


def test_every_console_route_is_behind_the_jwt_authorizer(template):  # noqa: F811
    routes = _routes(template)
    assert {r["Properties"]["RouteKey"] for r in routes.values()} == ROUTES | {SLACK_ROUTE}
    (slack,) = [r["Properties"] for r in routes.values() if r["Properties"]["RouteKey"] == SLACK_ROUTE]
    assert "AuthorizerId" not in slack and slack.get("AuthorizationType", "NONE") == "NONE"
    assert slack["Target"] == {"Fn::Sub": "integrations/${ConsoleIntegration}"}
    permission = resources(template)["SlackActionsInvokePermission"]["Properties"]
    assert permission["SourceArn"]["Fn::Sub"].endswith(":${WebhookApi}/*/POST/slack/actions")
    routes = {k: v for k, v in routes.items() if v["Properties"]["RouteKey"] != SLACK_ROUTE}
    for name, route in routes.items():
        props = route["Properties"]
        assert props["ApiId"] == {"Ref": "WebhookApi"}, name
        assert props["AuthorizationType"] == "JWT", name
        assert props["AuthorizerId"] == {"Ref": "ConsoleJwtAuthorizer"}, name
        assert props["Target"] == {"Fn::Sub": "integrations/${ConsoleIntegration}"}, name
    authorizer = resources(template)["ConsoleJwtAuthorizer"]["Properties"]
    assert authorizer["AuthorizerType"] == "JWT" and authorizer["ApiId"] == {"Ref": "WebhookApi"}
    assert authorizer["IdentitySource"] == ["$request.header.Authorization"]
    assert authorizer["JwtConfiguration"] == {
        "Issuer": {"Ref": "ConsoleJwtIssuer"},
        "Audience": {"Ref": "ConsoleJwtAudience"},
    }


def test_the_webhook_route_keeps_no_authorizer(template):  # noqa: F811
    (event,) = events_of_type(function_props(template, "WebhookFunction"), "HttpApi")
    assert "Auth" not in event
    api = resources(template)["WebhookApi"]["Properties"]
    assert "DefaultAuthorizer" not in api.get("Auth", {}) and "Authorizers" not in api.get("Auth", {})


def test_the_integration_waits_as_long_as_the_function_runs(template):  # noqa: F811
    integration = resources(template)["ConsoleIntegration"]["Properties"]
    assert integration["IntegrationType"] == "AWS_PROXY"
    assert integration["PayloadFormatVersion"] == "2.0"
    assert integration["IntegrationUri"] == {"Fn::GetAtt": ["ConsoleFunction", "Arn"]}
    timeout = function_props(template, "ConsoleFunction")["Timeout"]
    assert timeout * 1000 <= integration["TimeoutInMillis"] <= 30_000


def test_only_the_console_routes_may_invoke_it(template):  # noqa: F811
    permission = resources(template)["ConsoleInvokePermission"]["Properties"]
    assert permission["Principal"] == "apigateway.amazonaws.com"
    assert permission["SourceArn"]["Fn::Sub"].endswith(":${WebhookApi}/*/*/console*")


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
