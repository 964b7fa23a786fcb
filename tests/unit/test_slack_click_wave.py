"""A Slack Approve button decides the request it was posted with: the wave it names, not whichever
wave of the digest waits when it is clicked. With two waves that each wait for a person, the stage
request's button clicked again (its message kept its buttons: Slack's update failed, or someone
scrolled back to it) once stage was approved, verified and soaked and prod waits, answers
``already-decided`` and prod keeps waiting (before: it approved prod, which rolled without anyone
deciding on it). The console function in process, as Slack calls it, on moto."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
import yaml
from tagpin import wiring
from tagpin.domain.messages import Trigger
from tagpin_local.lambda_runtime import load_handler

from tests.support.console import (
    HOOKS,
    IMAGE,
    PARAMETER,
    SLACK_SECRET,
    World,
    csrf_of,
    invoke,
    make_world,
    slack_request,
)
from tests.support.constants import D2, REGION
from tests.support.trail import start_promotion


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, dynamodb: Any, state_table: str, queues: Any) -> Iterator[World]:
    yield make_world(monkeypatch, dynamodb, queues, "token")
    wiring.reset()


def click(wave: str) -> dict[str, Any]:
    value = json.dumps({"image": IMAGE, "digest": D2, "wave": wave})
    payload = {
        "type": "block_actions",
        "user": {"id": "U1", "username": "ana"},
        "actions": [{"action_id": "approve", "value": value}],
    }
    return slack_request(urlencode({"payload": json.dumps(payload)}).encode())


def two_waves(world: World) -> Any:
    """Stage then prod, each waiting for a person; D2's promotion waits at stage. The console
    function's handler, loaded with that configuration."""
    ssm = boto3.client("ssm", region_name=REGION)
    document = yaml.safe_load(ssm.get_parameter(Name=PARAMETER)["Parameter"]["Value"])
    document["images"][0]["approval"] = True  # every wave of the image waits for a person
    document["rollout"] = {
        "waves": [{"name": "stage", "clusters": ["lab"]}, {"name": "prod", "clusters": ["prod"]}],
        "notifications": {"sns": False, "webhooks_secret": HOOKS},
    }
    ssm.put_parameter(Name=PARAMETER, Value=yaml.safe_dump(document), Type="String", Overwrite=True)
    ssm.put_parameter(
        Name="/" + HOOKS, Value=json.dumps({"slack_signing_secret": SLACK_SECRET}), Type="SecureString"
    )
    wiring.reset()
    handler = load_handler("console")
    state, now = world.state, int(time.time() * 1000)
    state.tags.record(IMAGE, D2, now, Trigger.POLL)
    assert start_promotion(state, IMAGE, D2, now) is not None
    assert state.promotions.request_approval(IMAGE, D2, 0, now, now + 3_600_000)  # stage waits
    return handler


def test_an_old_requests_approve_button_does_not_approve_the_next_wave(world: World) -> None:
    handler = two_waves(world)
    state, now = world.state, int(time.time() * 1000)
    first = invoke(handler, click("stage"))
    assert first["statusCode"] == 200 and "Approved" in json.loads(first["body"])["text"], first
    # stage rolled, was verified and soaked; prod now waits for a person
    assert state.promotions.wave_verified(IMAGE, D2, 0, now + 1)
    assert state.promotions.advance(IMAGE, D2, 0, now + 2, 1)
    assert state.promotions.request_approval(IMAGE, D2, 1, now + 3, now + 3_600_000)

    again = invoke(handler, click("stage"))  # the stage request's button, clicked again
    assert again["statusCode"] == 200
    promotion = state.promotions.get(IMAGE)
    assert promotion is not None and promotion.awaiting_wave == 1, promotion
    assert 1 not in promotion.approved_waves
    approved = [e.detail for e in state.history.of_image(IMAGE) if e.event == "approved"]
    assert approved == ["wave stage: approved by ana via slack"], approved


def test_a_console_page_listing_an_earlier_wave_does_not_approve_the_next_one(world: World) -> None:
    """The console's pending approvals, loaded while stage waited and submitted once prod waits:
    the form names its wave, so nothing is decided (before: it approved prod)."""
    handler = two_waves(world)
    state, now = world.state, int(time.time() * 1000)
    cookie = world.sign_in()
    page = world.get("/console", cookie=cookie)["body"]
    assert 'name="wave" value="stage"' in page, page
    stage_form = {"image": IMAGE, "digest": D2, "wave": "stage", "csrf": csrf_of(page)}
    assert invoke(handler, click("stage"))["statusCode"] == 200  # stage approved (in Slack)
    assert state.promotions.wave_verified(IMAGE, D2, 0, now + 1)
    assert state.promotions.advance(IMAGE, D2, 0, now + 2, 1)
    assert state.promotions.request_approval(IMAGE, D2, 1, now + 3, now + 3_600_000)

    stale = world.post("/console/actions/approve", stage_form, cookie=cookie)
    assert "notice=already-decided" in stale["headers"]["Location"], stale
    promotion = state.promotions.get(IMAGE)
    assert promotion is not None and promotion.awaiting_wave == 1 and 1 not in promotion.approved_waves
