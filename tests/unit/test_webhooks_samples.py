"""Every sample in events/webhooks: parsed to its expected normalised events, authenticated with
the sample secret, acted on through the service; tampered or unauthenticated copies are refused."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from tagpin.adapters.webhooks.auth import SourceSecret
from tagpin.adapters.webhooks.sources import SOURCES
from tagpin.ports.state import State

from tests.support.constants import STATE_TABLE
from tests.support.webhooks import FOLLOWED, SAMPLE_NAMES, Hook, http_parts, sample, secret

HTTP_SAMPLES = [n for n in SAMPLE_NAMES if n != "ecr"]


@pytest.fixture
def hook(store: State, dynamodb: Any) -> Hook:
    return Hook(store, dynamodb, STATE_TABLE)


def test_every_source_has_a_sample_and_a_secret_entry() -> None:
    sources = {sample(n)[0] for n in SAMPLE_NAMES}
    assert sources == set(SOURCES)
    assert set(secret()) == set(SOURCES) - {"ecr"}  # ECR is authorised by IAM, not a secret


@pytest.mark.parametrize("name", HTTP_SAMPLES)
def test_sample_parses_to_its_expected_events(name: str) -> None:
    source, event, expected = sample(name)
    _, headers, body, _ = http_parts(event)
    options = SourceSecret.model_validate(secret()[source]).options
    assert SOURCES[source].parse(body, {k.lower(): v for k, v in headers.items()}, options) == expected


def test_ecr_sample_parses_to_its_expected_event() -> None:
    _, event, expected = sample("ecr")
    assert SOURCES["ecr"].parse(json.dumps(event).encode(), {}) == expected


@pytest.mark.parametrize("name", HTTP_SAMPLES)
def test_sample_is_accepted_through_the_service(hook: Hook, name: str) -> None:
    _, event, expected = sample(name)
    result = hook.deliver(event)
    assert result.status == 202, result.body
    followed = [e for e in expected if f"{e.registry}/{e.repository}:{e.tag}" in FOLLOWED]
    assert result.body["accepted"] == len(followed) >= 1
    assert result.body["ignored"] == len(expected) - len(followed)
    # the registry's answer is what is enqueued, never the payload's digest
    assert [c.move.digest for c in hook.queue.sent] == [hook.resolver.default] * len(followed)
    assert {c.move.image for c in hook.queue.sent} == {
        f"{e.registry}/{e.repository}:{e.tag}" for e in followed
    }


def test_ecr_sample_is_accepted_without_http_authentication(hook: Hook) -> None:
    _, event, _ = sample("ecr")
    result = hook.service.handle_trusted("ecr", json.dumps(event).encode())
    assert result.status == 202 and result.body["accepted"] == 1
    assert [c.move.image for c in hook.queue.sent] == [FOLLOWED[-1]]


def test_ecr_is_never_accepted_over_http(hook: Hook) -> None:
    _, event, _ = sample("ecr")
    result = hook.post("ecr", {"authorization": "Bearer local-dev-webhook-token"}, json.dumps(event).encode())
    assert result.status == 401 and "EventBridge" in result.body["error"]
    assert hook.queue.sent == []


def _strip_credentials(event: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(event)
    for name in (
        "authorization",
        "x-tagpin-token",
        "x-hub-signature-256",
        "x-nexus-webhook-signature",
        "x-jfrog-event-auth",
    ):
        stripped["headers"].pop(name, None)
    stripped.pop("queryStringParameters", None)
    return stripped


@pytest.mark.parametrize("name", HTTP_SAMPLES)
def test_sample_without_credentials_is_401(hook: Hook, name: str) -> None:
    _, event, _ = sample(name)
    result = hook.send(_strip_credentials(event))
    assert result.status == 401
    assert hook.queue.sent == [] and hook.resolver.calls == []


@pytest.mark.parametrize("name", HTTP_SAMPLES)
def test_sample_with_another_secret_is_401(store: State, dynamodb: Any, name: str) -> None:
    _, event, _ = sample(name)
    other = json.loads(json.dumps(secret()).replace("local-dev-webhook-token", "another-token"))
    hook = Hook(store, dynamodb, STATE_TABLE, secrets=other)
    assert hook.send(event).status == 401
    assert hook.queue.sent == []


@pytest.mark.parametrize(
    "name", [n for n in HTTP_SAMPLES if n.startswith(("github", "nexus", "artifactory-legacy"))]
)
def test_signed_sample_with_a_changed_body_is_401(hook: Hook, name: str) -> None:
    _, event, _ = sample(name)
    forged = copy.deepcopy(event)
    forged["body"] = forged["body"].replace("stable", "stablf")
    assert forged["body"] != event["body"]
    assert hook.send(forged).status == 401
    assert hook.queue.sent == []


@pytest.mark.parametrize("name", HTTP_SAMPLES)
def test_replayed_sample_enqueues_at_most_once_per_delivery(hook: Hook, name: str) -> None:
    _, event, expected = sample(name)
    first = hook.deliver(event)
    second = hook.deliver(event)
    assert first.status == second.status == 202
    if all(e.delivery_id for e in expected):
        assert second.body["duplicates"] == first.body["accepted"] >= 1
        assert second.body["accepted"] == 0
        assert len(hook.queue.sent) == first.body["accepted"]
        assert all(e["outcome"] in ("duplicate", "ignored") for e in second.body["events"])
    else:  # no delivery id: re-checked, found unchanged
        assert second.body["duplicates"] == 0
        assert {e["outcome"] for e in second.body["events"]} <= {"unchanged", "ignored"}
