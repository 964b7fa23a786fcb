"""The console in tests and the bench: its function with moto in process (a configuration file, the
state table, the queues: ``make_world``) and requests to it as the HTTP API sends them (payload 2.0)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
import yaml
from tagpin import wiring
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.ports.state import State
from tagpin_local.lambda_runtime import LocalContext, http_api_event, load_handler

from tests.support.constants import REGION, STATE_TABLE

TOKEN = "console-test-token-0123456789abcdef"
SESSION_KEY = "console-test-session-key-0123456789abcdefghijkl"
COOKIE_OF = re.compile(r"^tagpin_session=([^;]*)")


class MemorySignOuts:
    """``tagpin.adapters.web.auth.SignOuts`` in memory: the sessions signed out, and until when."""

    def __init__(self) -> None:
        self.sessions: dict[str, int] = {}

    def end(self, session: str, expires_at_s: int, now_ms: int) -> None:
        self.sessions[session] = expires_at_s

    def ended(self, session: str) -> bool:
        return session in self.sessions


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


SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # the shape of Slack's example, not a real one
HOOKS = "tagpin/notifications/hooks"  # the notification secret that holds it


def slack_request(body: bytes, secret: str = SLACK_SECRET, at: int | None = None) -> dict[str, Any]:
    """``POST /slack/actions`` with ``body``, signed as Slack signs it (at ``at``, epoch s: now)."""
    stamp = str(at if at is not None else int(time.time()))
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": signature,
    }
    event = request("POST", "/slack/actions")
    event["headers"] |= headers
    try:  # as the HTTP API passes a body: text, or base64 when it is not UTF-8
        event["body"], event["isBase64Encoded"] = body.decode("utf-8"), False
    except UnicodeDecodeError:
        event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
    return event


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


PARAMETER = "/tagpin/config"
IMAGE = "registry.example.com/team/web:stable"  # the configuration's image
TARGET = "prod/web/Deployment/web/web"  # and its target


@dataclass
class World:
    """The console function with moto in process, its state table and its queues."""

    handler: Any
    state: State
    sqs: Any
    queue_url: str
    dlq_url: str
    dynamodb: Any = None

    def state_items(self, prefix: str) -> list[dict[str, Any]]:
        """The state table's items whose partition key starts with ``prefix`` (a scan: tests only)."""
        items = self.dynamodb.scan(TableName=STATE_TABLE)["Items"]
        return [item for item in items if item["pk"]["S"].startswith(prefix)]

    def get(self, path: str, cookie: str | None = None, **kw: Any) -> dict[str, Any]:
        return invoke(self.handler, request("GET", path, cookie=cookie, **kw))

    def post(self, path: str, form: dict[str, str], cookie: str | None = None, **kw: Any) -> dict[str, Any]:
        return invoke(self.handler, request("POST", path, form=form, cookie=cookie, **kw))

    def sign_in(self) -> str:
        response = self.post("/console/signin", {"token": TOKEN})
        assert response["statusCode"] == 303, response
        cookie = session_cookie(response)
        assert cookie
        return cookie


def console_config(extra_images: list[dict[str, Any]] | None = None) -> None:
    """The configuration parameter: clusters prod and lab, ``IMAGE`` on ``TARGET`` (and more)."""
    document = {
        "clusters": {"prod": {"kubeconfig": {"secret": "tagpin/clusters/prod"}},
                     "lab": {"kubeconfig": {"secret": "tagpin/clusters/lab"}}},
        "images": [
            {"image": IMAGE, "targets": [{"cluster": "prod", "namespace": "web", "kind": "Deployment",
                                          "name": "web", "container": "web"}]},
            *(extra_images or []),
        ],
    }  # fmt: skip
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name=PARAMETER, Value=yaml.safe_dump(document), Type="String", Overwrite=True
    )


def make_world(monkeypatch: pytest.MonkeyPatch, dynamodb: Any, queues: Any, auth: str = "token") -> World:
    """The console function on moto in process (the unit tests' ``dynamodb``, ``state_table`` and
    ``queues``), signed in with a token (``auth="token"``) or the JWT authorizer's claims."""
    console_config()
    for name, value in console_env(STATE_TABLE, queues.url, queues.dlq_url, PARAMETER, auth).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TAGPIN_CONFIG_FILE", raising=False)
    wiring.reset()
    handler = load_handler("console")
    sqs = boto3.client("sqs", region_name=REGION)
    return World(handler, dynamodb_state(dynamodb, STATE_TABLE), sqs, queues.url, queues.dlq_url, dynamodb)
