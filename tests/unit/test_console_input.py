"""Untrusted input at the console never makes a 5xx: Slack's bodies (signed or not, nested JSON,
not UTF-8, too many fields, too large), the console's forms (not base64, not UTF-8, too large),
query parameters, and dead letters nested too deeply. The console function with moto in process,
called with the events the HTTP API sends (tests/integration/test_console_http.py sends some of
them over HTTP)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from tagpin import wiring

from tests.support.aws import enforce_key_limits
from tests.support.console import (
    HOOKS,
    IMAGE,
    PARAMETER,
    SLACK_SECRET,
    TARGET,
    World,
    csrf_of,
    invoke,
    make_world,
    request,
    slack_request,
)
from tests.support.constants import D2, REGION, STATE_TABLE

NESTED = b"payload=" + b"[" * 20_000  # 60 KB of JSON nested 20,000 deep


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, dynamodb: Any, state_table: str, queues: Any) -> Iterator[World]:
    yield make_world(monkeypatch, dynamodb, queues)
    wiring.reset()


@pytest.fixture
def slack(world: World) -> World:
    """The console with Slack's signing secret configured (``slack_signing_secret``)."""
    ssm = boto3.client("ssm", region_name=REGION)
    document = yaml.safe_load(ssm.get_parameter(Name=PARAMETER)["Parameter"]["Value"])
    document["rollout"] = {"notifications": {"sns": False, "webhooks_secret": HOOKS}}
    ssm.put_parameter(Name=PARAMETER, Value=yaml.safe_dump(document), Type="String", Overwrite=True)
    ssm.put_parameter(
        Name="/" + HOOKS, Value=json.dumps({"slack_signing_secret": SLACK_SECRET}), Type="SecureString"
    )
    wiring.reset()
    return world


def _click(value: str, **payload: Any) -> bytes:
    body = {"actions": [{"action_id": "approve", "value": value}], "user": {"id": "U1"}} | payload
    return urlencode({"payload": json.dumps(body)}).encode()


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


SLACK_BODIES = {
    "nested 20,000 deep": NESTED,
    "nested in the button's value": _click(_deep(5_000)),
    "nested in an ignored field": b"payload="
    + quote('{"actions": [{"action_id": "approve", "value": "{}"}], "extra": ' + _deep(3_000) + "}").encode(),
    "not UTF-8": b"payload=\xff\xfe\xfd",
    "too many fields": b"&".join([b"a=1"] * 5_000),
    "no payload": b"nothing=here",
    "payload not JSON": b"payload=%7Bnot%20json",
    "payload a list": b"payload=%5B1%2C2%5D",
    "actions empty": _click("x", actions=[]),
    "user not an object": _click(json.dumps({"image": IMAGE, "digest": D2}), user=[1]),
    "value not an object": _click("[1, 2]"),
    "digest not a digest": _click(json.dumps({"image": IMAGE, "digest": "sha256:nope"})),
}


@pytest.mark.parametrize("name", list(SLACK_BODIES))
def test_every_signed_slack_body_that_is_not_a_click_is_a_400(slack: World, name: str) -> None:
    body = SLACK_BODIES[name]
    response = invoke(slack.handler, slack_request(body))
    assert response["statusCode"] == 400, (name, response)
    assert response["body"] == "not an approval button's click" or "digest" in response["body"]


def test_a_slack_body_too_large_or_not_base64_is_refused_before_it_is_read(slack: World) -> None:
    large = invoke(slack.handler, slack_request(b"payload=" + b"[" * 70_000))
    assert large["statusCode"] == 413
    event = slack_request(b"payload=x")
    event["body"], event["isBase64Encoded"] = "%%% not base64 %%%", True
    assert invoke(slack.handler, event)["statusCode"] == 400
    unsigned = slack_request(NESTED)
    del unsigned["headers"]["x-slack-signature"]
    assert invoke(slack.handler, unsigned)["statusCode"] == 401  # nothing read without a signature


def test_the_nested_body_was_a_recursion_error_before(slack: World) -> None:
    """The body of the report: ``json.loads`` raises ``RecursionError`` on it (the 500 it made)."""
    with pytest.raises(RecursionError):
        json.loads(NESTED.removeprefix(b"payload="))
    assert invoke(slack.handler, slack_request(NESTED))["statusCode"] == 400


@pytest.mark.parametrize(
    "body,encoded,status",
    [
        ("%%% not base64 %%%", True, 400),
        (base64.b64encode(b"csrf=\xff\xfe&target=x").decode(), True, 400),  # not UTF-8
        ("a=" + "x" * 40_000, False, 413),
        (base64.b64encode(b"a=" + b"x" * 40_000).decode(), True, 413),
        ("&".join(["a=1"] * 100), False, 400),  # too many fields
    ],
)
def test_a_form_that_cannot_be_read_is_a_4xx(world: World, body: str, encoded: bool, status: int) -> None:
    cookie = world.sign_in()
    for path in ("/console/actions/hold", "/console/signout", "/console/signin"):
        event = request("POST", path, cookie=cookie)
        event["body"], event["isBase64Encoded"] = body, encoded
        assert invoke(world.handler, event)["statusCode"] == status, path
    assert world.state.targets.get(TARGET) is None


def test_a_notice_count_that_is_not_a_number_is_left_out(world: World) -> None:
    cookie = world.sign_in()
    for count in ("²", "١٢", "9" * 40, "-1", ""):
        page = world.get("/console/dead-letters", cookie=cookie, query={"notice": "redriven", "n": count})
        assert page["statusCode"] == 200 and "Messages sent back to the changes queue:</" in page["body"]
    page = world.get("/console/dead-letters", cookie=cookie, query={"notice": "redriven", "n": "7"})
    assert "Messages sent back to the changes queue: 7" in page["body"]


def test_a_dead_letter_nested_too_deeply_is_shown_as_text(world: World) -> None:
    for n, body in enumerate([_deep(20_000), '{"detail-type": "Lambda Function Invocation Result - '
                              'Failure", "detail": [1]}']):  # fmt: skip
        world.sqs.send_message(
            QueueUrl=world.dlq_url, MessageBody=body, MessageGroupId="g", MessageDeduplicationId=str(n)
        )
    cookie = world.sign_in()
    page = world.get("/console/dead-letters", cookie=cookie)
    assert page["statusCode"] == 200 and "[[[[[[[[" in page["body"]
    done = world.post("/console/actions/redrive", {"csrf": csrf_of(page["body"])}, cookie=cookie)
    assert done["statusCode"] == 303 and "n=2" in done["headers"]["Location"]


# -- key-shaped input: DynamoDB's limits (moto does not enforce them; ``enforce_key_limits`` does) --
LONG = "é" * 513  # 513 characters, 1,026 bytes: over a sort key's 1,024 bytes


@pytest.fixture
def limits(world: World) -> Iterator[None]:
    undo = enforce_key_limits(wiring.aws("dynamodb"))
    yield
    undo()


def test_the_model_of_dynamodbs_limits_refuses_a_long_key(world: World, limits: None) -> None:
    with pytest.raises(ClientError, match="maximum size limit of 1024 bytes"):
        wiring.aws("dynamodb").get_item(TableName=STATE_TABLE, Key={"pk": {"S": "x"}, "sk": {"S": LONG}})


@pytest.mark.parametrize(
    "path,query,field",
    [
        ("/console/targets", {"after": "i00:" + LONG}, "after"),
        ("/console/images", {"after": "i00:" + LONG}, "after"),
        ("/console/target", {"id": LONG}, "id"),
        ("/console/target", {"id": TARGET, "image": LONG}, "image"),
        ("/console/image", {"ref": LONG}, "ref"),
    ],
)
def test_a_query_too_long_for_a_key_is_a_400_naming_it(
    world: World, limits: None, path: str, query: dict[str, str], field: str
) -> None:
    response = world.get(path, cookie=world.sign_in(), query=query)
    assert response["statusCode"] == 400, response["body"][-600:]
    assert f"{field}: " in response["body"]


@pytest.mark.parametrize(
    "action,form,field",
    [
        ("hold", {"target": LONG}, "target"),
        ("release", {"target": TARGET, "image": LONG}, "image"),
        ("approve", {"image": LONG, "digest": D2}, "image"),
        ("reject", {"image": IMAGE, "digest": LONG}, "digest"),
    ],
)
def test_a_form_field_too_long_for_a_key_is_a_400_and_changes_nothing(
    world: World, limits: None, action: str, form: dict[str, str], field: str
) -> None:
    cookie = world.sign_in()
    csrf = csrf_of(world.get("/console/targets", cookie=cookie)["body"])
    response = world.post(f"/console/actions/{action}", form | {"csrf": csrf}, cookie=cookie)
    assert response["statusCode"] == 400 and f"{field}: 1,026 bytes; at most" in response["body"]
    assert world.state.targets.get(TARGET) is None


def test_at_the_limit_a_lookup_is_not_found_not_refused(world: World, limits: None) -> None:
    cookie = world.sign_in()
    unknown = world.get("/console/target", cookie=cookie, query={"id": "é" * 512})  # 1,024 bytes
    assert unknown["statusCode"] == 404
    image = world.get("/console/image", cookie=cookie, query={"ref": "é" * 511 + "x"})  # 1,023 bytes
    assert image["statusCode"] == 404


def test_a_slack_click_for_an_image_too_long_for_a_key_is_a_400(slack: World, limits: None) -> None:
    value = json.dumps({"image": "€" * 400, "digest": D2})  # 1,200 bytes (Slack's text keeps 512)
    response = invoke(slack.handler, slack_request(_click(value)))
    assert response["statusCode"] == 400 and "image: 1,200 bytes" in response["body"]
