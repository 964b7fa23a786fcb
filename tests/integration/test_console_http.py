"""The console behind the local stand-in of the HTTP API's JWT authorizer (the AWS path): a request
whose bearer token the authorizer does not accept never reaches the function (401); an accepted
one reaches it with the token's claims, and the person named there is who did the action."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tagpin.ports.state import TargetStatus
from tagpin_local.kube.manifests import deployment
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import state_of

pytestmark = pytest.mark.integration

TARGET = "local/default/Deployment/web/web"
CLAIMS = {"sub": "0b5d2a6e", "email": "ops@example.com", "iss": "https://issuer.example"}


def claims_of(token: str) -> dict[str, Any] | None:
    return CLAIMS if token == "a-valid-jwt" else None


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=False, consume=False, console_auth="jwt", jwt_claims=claims_of)
    with LocalStack(options) as stack:
        assert stack.registry is not None
        stack.kube.create(
            deployment("web", "default", f"{stack.registry.host}/demo/web:stable", container="web")
        )
        yield stack


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
