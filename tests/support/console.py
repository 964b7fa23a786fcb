"""The console in tests and the bench: its function with moto in process (a configuration file, the
state table, the queues) and requests to it as the HTTP API sends them (payload 2.0)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from tagpin_local.lambda_runtime import LocalContext, http_api_event

TOKEN = "console-test-token-0123456789abcdef"
SESSION_KEY = "console-test-session-key-0123456789abcdefghijkl"
COOKIE_OF = re.compile(r"^tagpin_session=([^;]*)")


def console_env(
    state_table: str, queue_url: str, dlq_url: str, config_parameter: str, auth: str = "token"
) -> dict[str, str]:
    """The console function's environment (token sign-in unless ``auth`` is "jwt")."""
    env = {
        "TAGPIN_STATE_TABLE": state_table,
        "TAGPIN_QUEUE_URL": queue_url,
        "TAGPIN_DEAD_LETTER_QUEUE_URL": dlq_url,
        "TAGPIN_CONFIG_PARAMETER": config_parameter,
        "TAGPIN_CONSOLE_AUTH": auth,
        "POWERTOOLS_SERVICE_NAME": "console",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    if auth == "token":
        env |= {"TAGPIN_CONSOLE_TOKEN": TOKEN, "TAGPIN_CONSOLE_SESSION_KEY": SESSION_KEY}
    return env


def route_of(method: str, path: str) -> str:
    if path == "/slack/actions":
        return "POST /slack/actions"
    return f"{method} /console" if path.rstrip("/") == "/console" else f"{method} /console/{{proxy+}}"


def request(
    method: str,
    path: str,
    query: Mapping[str, str] | None = None,
    form: Mapping[str, str] | None = None,
    cookie: str | None = None,
    claims: dict[str, Any] | None = None,
    bearer: str | None = None,
    host: str = "127.0.0.1:8080",
    proto: str = "http",
) -> dict[str, Any]:
    """An HTTP API v2 event for the console."""
    headers = {"host": host, "x-forwarded-proto": proto, "user-agent": "test"}
    body = b""
    if form is not None:
        body = urlencode(form).encode()
        headers["content-type"] = "application/x-www-form-urlencoded"
    if cookie:
        headers["cookie"] = f"tagpin_session={cookie}"
    if bearer:
        headers["authorization"] = f"Bearer {bearer}"
    return http_api_event(
        method, path, urlencode(query or {}), headers, body, "127.0.0.1", route_of(method, path), claims
    )


def invoke(handler: Any, event: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = handler(event, LocalContext("tagpin-console"))
    return response


def session_cookie(response: Mapping[str, Any]) -> str | None:
    for raw in response.get("cookies") or []:
        match = COOKIE_OF.match(raw)
        if match:
            return match.group(1)
    return None


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF field on the page"
    return match.group(1)
