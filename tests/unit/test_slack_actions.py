"""Slack's approval buttons: a click is accepted only signed with the app's secret (HMAC SHA-256
over v0:<timestamp>:<body>, constant-time compare) within five minutes; its payload is read
defensively. The approval request's message carries the buttons, its text escaped."""

from __future__ import annotations

import hashlib
import hmac
import json
from urllib.parse import urlencode

import pytest
from tagpin.adapters.notify import slack_payload
from tagpin.adapters.slack.actions import SlackRefused, read, verify
from tagpin.ports.notify import RolloutEvent, RolloutEventKind

from tests.support.constants import D1, WEB

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # Slack's documentation example shape, not a real one
NOW = 1_700_000_000


def signed(body: bytes, secret: str = SECRET, at: int = NOW) -> dict[str, str]:
    base = f"v0:{at}:".encode() + body
    return {
        "X-Slack-Request-Timestamp": str(at),
        "X-Slack-Signature": "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest(),
    }


def click(action: str = "approve", digest: str = D1, **payload: object) -> bytes:
    value = json.dumps({"image": WEB, "digest": digest, "wave": "prod"})
    body = {
        "type": "block_actions",
        "user": {"id": "U1", "username": "ana"},
        "actions": [{"action_id": action, "value": value}],
        "response_url": "https://hooks.slack.com/actions/T/1/x",
        **payload,
    }
    return urlencode({"payload": json.dumps(body)}).encode()


def test_a_signed_click_is_read() -> None:
    body = click()
    verify(signed(body), body, SECRET, NOW + 10)
    got = read(body)
    assert (got.approve, got.image, got.digest, got.wave, got.user) == (True, WEB, D1, "prod", "ana")
    assert got.response_url == "https://hooks.slack.com/actions/T/1/x"
    assert read(click("reject")).approve is False


@pytest.mark.parametrize(
    ("headers", "now", "message"),
    [
        ({}, NOW, "missing"),
        ({"X-Slack-Request-Timestamp": "x", "X-Slack-Signature": "v0=00"}, NOW, "malformed"),
        ("other secret", NOW, "invalid"),
        ("stale", NOW + 301, "five-minute"),
        ("tampered", NOW, "invalid"),
    ],
)
def test_anything_else_is_refused(headers: object, now: int, message: str) -> None:
    body = click()
    if headers == "other secret":
        headers = signed(body, secret="another")
    elif headers == "stale":
        headers = signed(body)
    elif headers == "tampered":
        headers = signed(click("reject"))  # a signature for another body
    with pytest.raises(SlackRefused, match=message) as refused:
        verify(headers, body, SECRET, now)  # type: ignore[arg-type]
    assert refused.value.status == 401


@pytest.mark.parametrize(
    "body",
    [
        b"payload=not-json",
        b"nothing=here",
        click("delete"),
        click(digest="sha256:short"),
        urlencode({"payload": json.dumps({"actions": []})}).encode(),
    ],
)
def test_a_payload_that_is_no_approval_click_is_a_400(body: bytes) -> None:
    with pytest.raises(SlackRefused) as refused:
        read(body)
    assert refused.value.status == 400


def test_an_approval_request_carries_buttons_and_escaped_text() -> None:
    event = RolloutEvent(RolloutEventKind.AWAITING_APPROVAL, WEB, D1, "prod", ["prod/a/Deployment/<b>/c"], 1)
    payload = slack_payload(event)
    (section, actions) = payload["blocks"]
    assert "<b>" not in section["text"]["text"] and "&lt;b&gt;" in section["text"]["text"]
    ids = [e["action_id"] for e in actions["elements"]]
    assert ids == ["approve", "reject"]
    assert json.loads(actions["elements"][0]["value"]) == {"image": WEB, "digest": D1, "wave": "prod"}
    applied = slack_payload(RolloutEvent(RolloutEventKind.APPLIED, WEB, D1, "prod", [], 1))
    assert "blocks" not in applied
