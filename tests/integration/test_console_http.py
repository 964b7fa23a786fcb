"""The console behind the local stand-in of the HTTP API's JWT authorizer (the AWS path): a request
whose bearer token the authorizer does not accept never reaches the function (401); an accepted
one reaches it with the token's claims, and the person named there is who did the action. Over
HTTP, no input makes a 5xx: Slack's bodies (a signed one nested 20,000 deep), and every query or
form field that becomes a DynamoDB key, checked against DynamoDB's limits (which moto does not
enforce: ``enforce_key_limits`` makes the function's client refuse what AWS would)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tagpin import wiring
from tagpin.ports.state import TargetStatus
from tagpin_local.kube.manifests import deployment
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.aws import enforce_key_limits
from tests.support.console import HOOKS, SLACK_SECRET, slack_request
from tests.support.stack import state_of

pytestmark = pytest.mark.integration

TARGET = "local/default/Deployment/web/web"
CLAIMS = {"sub": "0b5d2a6e", "email": "ops@example.com", "iss": "https://issuer.example"}


def claims_of(token: str) -> dict[str, Any] | None:
    return CLAIMS if token == "a-valid-jwt" else None


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=False,
        consume=False,
        console_auth="jwt",
        jwt_claims=claims_of,
        rollout={"notifications": {"sns": False, "webhooks_secret": HOOKS}},
    )
    with LocalStack(options) as stack:
        assert stack.registry is not None
        stack.kube.create(
            deployment("web", "default", f"{stack.registry.host}/demo/web:stable", container="web")
        )
        stack.put_secret(HOOKS, json.dumps({"slack_signing_secret": SLACK_SECRET}))
        yield stack


@pytest.fixture
def limits(st: LocalStack) -> Iterator[None]:
    """The console function's DynamoDB client refuses keys as AWS does (moto does not)."""
    undo = enforce_key_limits(wiring.aws("dynamodb"))
    yield
    undo()


def test_the_authorizer_refuses_before_the_function(st: LocalStack) -> None:
    calls = st.functions["console"].invocations
    for headers in ({}, {"authorization": "Bearer forged"}, {"authorization": "Basic a-valid-jwt"}):
        response = httpx.get(st.console_url + "/targets", headers=headers, timeout=10)
        assert response.status_code == 401 and response.json() == {"message": "Unauthorized"}
    assert st.functions["console"].invocations == calls
    # other methods have no route: 404 as the HTTP API answers
    assert httpx.request("PUT", st.console_url, timeout=10).status_code == 404


def test_the_claims_name_the_person(st: LocalStack) -> None:
    with httpx.Client(headers={"authorization": "Bearer a-valid-jwt"}, timeout=10) as client:
        page = client.get(st.console_url + "/targets")
        assert page.status_code == 200 and "ops@example.com" in page.text
        assert client.get(st.console_url + "/signin").status_code == 404  # the authorizer signs in
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert csrf is not None
        refused = client.post(st.console_url + "/actions/hold", data={"target": TARGET})
        assert refused.status_code == 403
        done = client.post(st.console_url + "/actions/hold", data={"target": TARGET, "csrf": csrf.group(1)})
        assert done.status_code == 303
    held = state_of(st).targets.get(TARGET)
    assert held is not None and held.status is TargetStatus.HELD and held.detail == "held by ops@example.com"


def _slack(st: LocalStack, body: bytes) -> httpx.Response:
    headers = {
        k: v for k, v in slack_request(body)["headers"].items() if k.startswith(("x-slack", "content"))
    }
    url = st.console_url.removesuffix("/console") + "/slack/actions"
    return httpx.post(url, content=body, headers=headers, timeout=30)


def test_a_signed_slack_body_nested_20000_deep_is_a_400_over_http(st: LocalStack) -> None:
    nested = b"payload=" + b"[" * 20_000  # 60 KB: json.loads raised RecursionError, a 500
    response = _slack(st, nested)
    assert response.status_code == 400 and response.text == "not an approval button's click"
    assert _slack(st, b"payload=\xff\xfe").status_code == 400  # not UTF-8: sent on base64-encoded
    assert _slack(st, b"payload=" + b"[" * 70_000).status_code == 413


LONG = "é" * 513  # 1,026 bytes: over a DynamoDB sort key's 1,024


@pytest.mark.parametrize(
    "path,field",
    [
        ("/targets?after=i00:" + LONG, "after"),
        ("/images?after=i00:" + LONG, "after"),
        ("/target?id=" + LONG, "id"),
        ("/target?id=x&image=" + LONG, "image"),
        ("/image?ref=" + LONG, "ref"),
    ],
)
def test_a_query_too_long_for_a_dynamodb_key_is_a_400_over_http(
    st: LocalStack, limits: None, path: str, field: str
) -> None:
    with httpx.Client(headers={"authorization": "Bearer a-valid-jwt"}, timeout=30) as client:
        response = client.get(st.console_url + path)
    assert response.status_code == 400, response.text[-400:]
    assert re.search(f"{field}: 1,0[23][60] bytes; at most 1,02[348]", response.text), response.text[-400:]


def test_a_form_field_too_long_for_a_dynamodb_key_is_a_400_over_http(st: LocalStack, limits: None) -> None:
    with httpx.Client(headers={"authorization": "Bearer a-valid-jwt"}, timeout=30) as client:
        page = client.get(st.console_url + "/targets")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert csrf is not None
        for name, form in (
            ("hold", {"target": LONG}),
            ("approve", {"image": LONG, "digest": "sha256:" + "a" * 64}),
        ):
            response = client.post(st.console_url + "/actions/" + name, data=form | {"csrf": csrf.group(1)})
            assert response.status_code == 400 and "1,026 bytes; at most" in response.text, name
        at_limit = client.get(st.console_url + "/target", params={"id": "é" * 512})  # 1,024 bytes
        assert at_limit.status_code == 404
