"""Signing out of the console on the local stack (a token exchanged for a session cookie, as
`tagpin local` serves it) ends the session on the server: a copy of the cookie, and the CSRF token
of its forms, are refused over HTTP after it. A stack of its own: the local stack's settings are the
process's environment, so two stacks with different sign-ins cannot serve side by side."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import state_of

pytestmark = pytest.mark.integration

TARGET = "local/default/Deployment/web/web"


@pytest.fixture(scope="module")
def token_st() -> Iterator[LocalStack]:
    """The local stack's console as `tagpin local` serves it: a token exchanged for a session cookie."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=False, consume=False)) as stack:
        yield stack


def test_a_copied_cookie_is_refused_after_signing_out(token_st: LocalStack) -> None:
    url = token_st.console_url
    signed_in = httpx.post(url + "/signin", data={"token": token_st.console_token}, timeout=10)
    assert signed_in.status_code == 303
    cookie = {"cookie": "tagpin_session=" + signed_in.cookies["tagpin_session"]}  # a copy of it
    page = httpx.get(url + "/targets", headers=cookie, timeout=10)
    assert page.status_code == 200
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert csrf is not None
    out = httpx.post(url + "/signout", data={"csrf": csrf.group(1)}, headers=cookie, timeout=10)
    assert out.status_code == 303 and out.headers["location"] == "/console/signin"
    assert httpx.get(url + "/targets", headers=cookie, timeout=10).status_code == 401
    form = {"target": TARGET, "csrf": csrf.group(1)}  # its CSRF token too: refused with the session
    assert httpx.post(url + "/actions/hold", data=form, headers=cookie, timeout=10).status_code == 401
    assert state_of(token_st).targets.get(TARGET) is None
