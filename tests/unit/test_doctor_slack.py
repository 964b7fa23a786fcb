"""`tagpin doctor`'s Slack check on a deployed stack: where the notification secret carries a
``slack_signing_secret`` (approval buttons), an unsigned POST to the ``SlackActionsUrl`` output must
be refused (401 or 403), which shows that the route is there. A Slack app still posting to an old
address (the webhook API's, before the console had an API of its own) gets 404s and its approvals
lapse: the fix says which URL to set. The HTTP answers are the console's own (tagpin.console.app)
or API Gateway's 404; tests/e2e/test_doctor.py runs it against the local stack's real route."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tagpin import wiring
from tagpin.domain.config import parse_config
from tagpin_cli import doctor_http
from tagpin_cli.doctor import Seat, Status
from tagpin_cli.environment import Stack

from tests.unit.test_doctor_aws import deployed

SLACK_URL = "https://console.example/slack/actions"
CONFIG = "images: []\nrollout: {notifications: {webhooks_secret: tagpin/notifications/chat}}\n"


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """The notification secret has a Slack signing secret; each POST gets the next answer."""
    monkeypatch.setattr(
        wiring, "secret_json", lambda name: {"slack": "https://hooks", "slack_signing_secret": "s"}
    )
    queued: list[tuple[int, str]] = []
    posted: list[str] = []

    def post(url: str, **_: Any) -> httpx.Response:
        posted.append(url)
        status, text = queued.pop(0)
        return httpx.Response(status, text=text)

    monkeypatch.setattr(httpx, "post", post)
    return queued


def check(**outputs: str) -> Any:
    seat = Seat(deployed(**outputs), config=parse_config(CONFIG, source="test"))
    (result,) = doctor_http.check_slack(seat)
    return result


def test_the_slack_route_that_checks_signatures_passes(answers):
    answers.append((401, "missing the Slack signature headers"))
    result = check(SlackActionsUrl=SLACK_URL)
    assert result.status is Status.OK and result.subject == SLACK_URL
    assert "answered 401" in result.detail and "Request URL must be this address" in result.detail


def test_a_missing_route_fails_with_the_url_to_give_slack(answers):
    answers.append((404, '{"message":"Not Found"}'))
    result = check(SlackActionsUrl=SLACK_URL)
    assert result.status is Status.FAIL and "answered 404, not 401 or 403" in result.detail
    assert "Request URL" in result.fix and "SlackActionsUrl" in result.fix and "Upgrading" in result.fix


def test_a_console_that_cannot_read_the_signing_secret_fails(answers):
    answers.append((401, "Slack approvals are not configured (slack_signing_secret)"))
    result = check(SlackActionsUrl=SLACK_URL)
    assert result.status is Status.FAIL and "NotificationSecrets" in result.fix


def test_slack_buttons_without_a_console_fail(answers):
    t = deployed()
    no_console = Stack(
        **{**t.__dict__, "outputs": {k: v for k, v in t.outputs.items() if k != "ConsoleFunctionName"}}
    )
    (result,) = doctor_http.check_slack(Seat(no_console, config=parse_config(CONFIG, source="test")))
    assert result.status is Status.FAIL and "ConsoleJwtIssuer" in result.fix and answers == []


def test_without_a_signing_secret_there_is_nothing_to_check(monkeypatch):
    monkeypatch.setattr(wiring, "secret_json", lambda name: {"slack": "https://hooks"})
    assert check(SlackActionsUrl=SLACK_URL).status is Status.SKIP
    seat = Seat(deployed(), config=parse_config("images: []\n", source="test"))
    assert [r.status for r in doctor_http.check_slack(seat)] == [Status.SKIP]
