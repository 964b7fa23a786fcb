"""A click on an approval request's Approve / Reject button, as Slack sends it to the app's
interactivity URL: verified, then read.

Slack signs each request: ``X-Slack-Signature`` is ``v0=`` + hex HMAC-SHA256 of
``v0:<X-Slack-Request-Timestamp>:<raw body>`` with the app's signing secret. A request is accepted
only with a valid signature (compared in constant time) and a timestamp within five minutes of
now (a replayed request is refused). The body is ``payload=<JSON>`` (form-encoded); the JSON is
untrusted: its fields are bounded and checked before anything is decided.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import Digest, is_digest

REPLAY_WINDOW_S = 300
MAX_BODY = 64 * 1024
MAX_FIELDS = 10  # of the form (Slack sends one: payload)


class SlackRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Slack(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _User(_Slack):
    id: str | None = None
    username: str | None = None
    name: str | None = None


class _Action(_Slack):
    action_id: str
    value: str  # JSON: the image, digest and wave the button was made for (tagpin.adapters.notify)


class _Payload(_Slack):
    actions: list[_Action] = Field(min_length=1)
    user: _User | None = None
    response_url: str | None = None


class _Value(_Slack):
    image: str
    digest: str
    wave: str = ""


@dataclass(frozen=True)
class Click:
    approve: bool
    image: FollowedKey
    digest: Digest
    wave: str
    user: str  # who clicked, as Slack names them (for the audit trail)
    response_url: str | None  # where the message is updated with the decision


def verify(headers: dict[str, str], body: bytes, secret: str, now: float) -> None:
    """Raise ``SlackRefused`` unless the request is Slack's, signed now with ``secret``."""
    lower = {k.lower(): v for k, v in headers.items()}
    timestamp, signature = lower.get("x-slack-request-timestamp", ""), lower.get("x-slack-signature", "")
    if not timestamp or not signature:
        raise SlackRefused(401, "missing the Slack signature headers")
    try:
        at = int(timestamp)
    except ValueError:
        raise SlackRefused(401, "malformed X-Slack-Request-Timestamp") from None
    if abs(now - at) > REPLAY_WINDOW_S:
        raise SlackRefused(401, "request timestamp outside the five-minute window (a replay?)")
    if len(body) > MAX_BODY:
        raise SlackRefused(413, "body too large")
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        raise SlackRefused(401, "invalid Slack signature")


def read(body: bytes) -> Click:
    """The click a verified body carries, or ``SlackRefused`` (400) naming what is wrong. The form
    has at most ``MAX_FIELDS`` fields; its JSON is read by pydantic's parser, which refuses
    nesting deeper than 200 levels (a body of 60 KB of ``[`` is a 400, never a ``RecursionError``)."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=False, max_num_fields=MAX_FIELDS)
        payload = _Payload.model_validate_json(form["payload"][0])
        action = payload.actions[0]
        value = _Value.model_validate_json(action.value)
    except (KeyError, ValidationError, ValueError, UnicodeDecodeError):  # ValidationError: JSON too
        raise SlackRefused(400, "not an approval button's click") from None
    user = payload.user or _User()
    who = (user.username or user.name or user.id or "someone")[:100]
    image, digest, wave = value.image[:512], value.digest, value.wave[:63]
    if action.action_id not in ("approve", "reject"):
        raise SlackRefused(400, f"unknown action {action.action_id[:40]!r}")
    if not is_digest(digest):
        raise SlackRefused(400, "the click names no digest")
    try:
        key = FollowedKey(image)
    except ValueError:
        raise SlackRefused(400, "the click names no followed image") from None
    url = payload.response_url
    url = url if url is not None and url.startswith("https://") else None
    return Click(action.action_id == "approve", key, Digest(digest), wave, who, url)
