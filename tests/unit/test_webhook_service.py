"""WebhookService: authentication, parsing and queueing (the HTTP answer), then the queued stage's
followed tags, re-resolution and enqueueing (``check_queued``).

A real Detector with a fake resolver, in-memory queues and moto's DynamoDB behind the state repositories.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tagpin.adapters.webhooks.sources import SOURCES
from tagpin.domain.config import TagpinConfig, parse_config
from tagpin.ports.registry import OCI_INDEX
from tagpin.ports.state import State, TargetStatus
from tagpin.usecases.detect import Detector
from tagpin.usecases.webhook import MAX_BODY, CheckFailed, WebhookResult, WebhookService

from tests.support.clock import FakeClock
from tests.support.constants import D1, D2, DISTRIBUTION_V1, WEB, WEB_TARGET, WEBHOOK_TOKEN
from tests.support.queues import ListNotificationQueue, ListQueue
from tests.support.registry import ScriptedRegistry
from tests.support.webhooks import checked_all, envelope, merged

HINT = "sha256:" + "f" * 64

WEBHOOK_CONFIG = """
clusters:
  dev: {kubeconfig: {file: /dev/null}}
images:
  - image: 127.0.0.1:5000/demo/web:stable
    targets:
      - {cluster: dev, namespace: demo, name: web, container: app}
"""


class Harness:
    def __init__(self, store: State, secrets: dict[str, str] | None = None) -> None:
        self.config: TagpinConfig = parse_config(WEBHOOK_CONFIG)
        self.resolver = ScriptedRegistry({WEB: D1})
        self.queue = ListQueue()
        self.notifications = ListNotificationQueue()
        self.store = store
        self.detector = Detector(
            self.resolver, store, self.queue, clock=FakeClock(1_000_000, step=1_000), sleep=lambda _s: None
        )
        self.service = WebhookService(
            sources=SOURCES,
            secrets=lambda: {"distribution": WEBHOOK_TOKEN} if secrets is None else secrets,
            config=lambda: self.config,
            detector=lambda: self.detector,
            notifications=lambda: self.notifications,
        )

    def post(
        self,
        body: bytes,
        *,
        auth: str | None = f"Bearer {WEBHOOK_TOKEN}",
        source: str = "distribution",
        content_type: str = DISTRIBUTION_V1,
    ) -> Any:
        headers = {"Content-Type": content_type}
        if auth is not None:
            headers["Authorization"] = auth
        return self.service.handle(source, headers, body, correlation_id="corr-1")

    def deliver(self, body: bytes) -> WebhookResult:
        """``body`` posted (answered 202 once queued, before any check), then the queued stage's
        result: what was accepted, ignored, a duplicate, each tag's outcome."""
        calls = len(self.resolver.calls)
        answer = self.post(body)
        assert answer.status == 202, answer
        assert answer.body["queued"] == len(json.loads(body)["events"])
        assert len(self.resolver.calls) == calls  # nothing checked yet
        return merged(checked_all(self.service, self.notifications))


def push(
    repository: str = "demo/web",
    tag: str | None = "stable",
    digest: str | None = HINT,
    host: str = "127.0.0.1:5000",
    event_id: str = "ev-1",
) -> dict[str, Any]:
    target: dict[str, Any] = {"mediaType": OCI_INDEX, "repository": repository, "digest": digest}
    if tag is not None:
        target["tag"] = tag
    return {"id": event_id, "action": "push", "target": target, "request": {"host": host}}


@pytest.fixture
def hook(store: State) -> Harness:
    return Harness(store)


# -- routing and authentication ---------------------------------------------------------------------


def test_unknown_source_is_404(hook: Harness) -> None:
    result = hook.post(envelope(push()), source="gitlab")
    assert result.status == 404
    assert "unknown source" in result.body["error"]
    assert hook.queue.sent == [] and hook.resolver.calls == []


def test_no_secret_configured_is_401(store: State) -> None:
    for secrets in ({}, {"distribution": ""}, {"other": WEBHOOK_TOKEN}):
        hook = Harness(store, secrets=secrets)
        result = hook.post(envelope(push()))
        assert result.status == 401
        assert "no secret" in result.body["error"]
        assert hook.queue.sent == [] and hook.resolver.calls == []


@pytest.mark.parametrize(
    "auth",
    [
        None,
        "",
        "Bearer",
        "Bearer wrong",
        f"Bearer {WEBHOOK_TOKEN}x",
        f"bearer{WEBHOOK_TOKEN}",
        f"Basic {WEBHOOK_TOKEN}",
        WEBHOOK_TOKEN[:-1],
    ],
)
def test_wrong_token_is_401(hook: Harness, auth: str | None) -> None:
    result = hook.post(envelope(push()), auth=auth)
    assert result.status == 401
    assert hook.notifications.bodies == [] and hook.resolver.calls == []


@pytest.mark.parametrize("auth", [f"Bearer {WEBHOOK_TOKEN}", WEBHOOK_TOKEN])
def test_right_token_is_202(hook: Harness, auth: str) -> None:
    result = hook.post(envelope(push()), auth=auth)
    assert result.status == 202
    assert result.body == {"queued": 1}
    assert hook.queue.sent == [] and hook.resolver.calls == []  # answered before the check
    assert merged(checked_all(hook.service, hook.notifications)).body["accepted"] == 1
    assert len(hook.queue.sent) == 1


def test_header_names_are_case_insensitive(hook: Harness) -> None:
    result = hook.service.handle(
        "distribution",
        {"AUTHORIZATION": f"Bearer {WEBHOOK_TOKEN}", "CONTENT-TYPE": DISTRIBUTION_V1},
        envelope(push()),
    )
    assert result.status == 202


def test_oversized_body_is_400(store: State) -> None:
    hook = Harness(store)
    body = envelope(push()) + b" " * MAX_BODY  # valid JSON: only the size is wrong
    assert len(body) > MAX_BODY
    assert Harness(store).post(body[:MAX_BODY]).status == 202  # at the limit: accepted
    result = hook.post(body)
    assert result.status == 413  # Payload Too Large
    assert "exceeds" in result.body["error"]
    assert hook.notifications.bodies == [] and hook.resolver.calls == []


def test_oversized_body_is_checked_after_authentication(hook: Harness) -> None:
    result = hook.post(b"x" * (MAX_BODY + 1), auth="Bearer wrong")
    assert result.status == 401


@pytest.mark.parametrize(
    "body", [b"", b"{", b"[]", b'{"events": 1}', b'{"events": [42]}', b"\xff\xfe", b"[" * 50_000]
)
def test_malformed_body_is_400(hook: Harness, body: bytes) -> None:
    result = hook.post(body)
    assert result.status == 400
    assert hook.notifications.bodies == []  # never queued


def test_wrong_content_type_is_415(hook: Harness) -> None:
    assert hook.post(envelope(push()), content_type="text/plain").status == 415
    assert hook.notifications.bodies == []


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(push(repository="Demo/Web"), id="uppercase-repository"),
        pytest.param(push(tag="bad tag"), id="bad-tag"),
        pytest.param(push(host="bad host"), id="bad-host"),
        # re-parses as "127.0.0.1:5000/demo/web@sha256:<hex>": a digest reference without a tag
        pytest.param(push(repository="demo/web@sha256", tag="a" * 64), id="digest-smuggled-as-tag"),
    ],
)
def test_invalid_image_in_notification_is_400(hook: Harness, event: dict[str, Any]) -> None:
    result = hook.post(envelope(event))
    assert result.status == 400
    assert "invalid image" in result.body["error"]
    assert hook.notifications.bodies == []  # a malformed notification is never queued


# -- acting on pushes -------------------------------------------------------------------------------


def test_unfollowed_image_is_ignored(hook: Harness) -> None:
    result = hook.deliver(envelope(push(repository="demo/other"), push(tag="canary")))
    assert result.status == 202
    assert result.body["accepted"] == 0
    assert result.body["ignored"] == 2
    assert {e["image"] for e in result.body["events"]} == {
        "127.0.0.1:5000/demo/other:stable",
        "127.0.0.1:5000/demo/web:canary",
    }
    assert all(e["outcome"] == "ignored" for e in result.body["events"])
    assert hook.queue.sent == [] and hook.resolver.calls == []
    assert hook.store.tags.get("127.0.0.1:5000/demo/other:stable") is None


def test_followed_image_is_enqueued_once_for_two_events(hook: Harness) -> None:
    result = hook.deliver(envelope(push(event_id="a"), push(event_id="b", digest=D2)))
    assert result.status == 202
    assert result.body["accepted"] == 1
    # One check for the tag (its unconfirmed hint is asked about again, then the registry wins).
    assert set(hook.resolver.calls) == {WEB}
    (change,) = hook.queue.sent
    assert (change.move.image, change.move.digest, change.move.trigger, change.move.correlation_id) == (
        WEB,
        D1,
        "webhook",
        "webhook:distribution/a/corr-1",  # which webhook, the delivery id, the API request id
    )
    (check,) = result.body["events"]
    assert check["outcome"] == "changed"
    assert check["enqueued"] is True
    stored = hook.store.tags.get(WEB)
    assert stored is not None
    assert stored.digest == D1
    assert change.move.observed_at == stored.observed_at


def test_followed_and_unfollowed_in_one_envelope(hook: Harness) -> None:
    result = hook.deliver(envelope(push(repository="demo/other"), push()))
    assert result.body["accepted"] == 1
    assert result.body["ignored"] == 1
    assert len(hook.queue.sent) == 1


def test_replay_is_unchanged_and_enqueues_nothing_once_applied(hook: Harness) -> None:
    body = envelope(push(digest=D1))
    first = hook.deliver(body)
    assert first.body["events"][0]["outcome"] == "changed"
    (change,) = hook.queue.sent
    # The consumer applied it.
    assert hook.store.targets.claim(WEB_TARGET, WEB, D1, change.move.observed_at, "webhook", now=1)
    assert hook.store.targets.finish(WEB_TARGET, D1, TargetStatus.APPLIED, 2, trigger="webhook")

    second = hook.deliver(body)
    assert second.status == 202
    check = second.body["events"][0]
    assert check["outcome"] == "unchanged"
    assert check["enqueued"] is False
    assert check["behind"] == 0
    assert check["hint_confirmed"] is True
    assert len(hook.queue.sent) == 1


def test_replay_before_the_target_is_applied_enqueues_again(hook: Harness) -> None:
    body = envelope(push(digest=D1))
    hook.deliver(body)
    second = hook.deliver(body)
    assert second.body["events"][0]["outcome"] == "unchanged"
    assert second.body["events"][0]["enqueued"] is True  # level-based: the target is still behind
    assert [c.move.digest for c in hook.queue.sent] == [D1, D1]


def test_hint_digest_is_not_trusted(hook: Harness) -> None:
    result = hook.deliver(envelope(push(digest=HINT)))
    check = result.body["events"][0]
    assert check["hint_confirmed"] is False
    assert check["digest"] == D1
    (change,) = hook.queue.sent
    assert change.move.digest == D1
    assert hook.store.tags.get(WEB).digest == D1  # type: ignore[union-attr]


def test_push_without_digest_still_resolves(hook: Harness) -> None:
    result = hook.deliver(envelope(push(digest=None)))
    check = result.body["events"][0]
    assert "hint_confirmed" not in check
    assert [c.move.digest for c in hook.queue.sent] == [D1]


def test_registry_down_is_202_then_the_check_fails_and_keeps_the_digest(hook: Harness) -> None:
    hook.deliver(envelope(push(digest=D1)))
    assert len(hook.queue.sent) == 1
    before = hook.store.tags.get(WEB)
    assert before is not None

    hook.resolver.answers[WEB] = ConnectionError("registry unreachable")
    assert hook.post(envelope(push(digest=D2))).status == 202  # answered: the check comes later
    with pytest.raises(CheckFailed) as failed:  # its message comes back (tried again)
        checked_all(hook.service, hook.notifications)
    result = failed.value.result
    (check,) = result.body["events"]
    assert check["outcome"] == "error"
    assert "ConnectionError: registry unreachable" in check["error"]
    assert "enqueued" not in check or check["enqueued"] is False
    assert len(hook.queue.sent) == 1
    after = hook.store.tags.get(WEB)
    assert after is not None
    assert (after.digest, after.observed_at) == (D1, before.observed_at)
    assert after.last_error == "ConnectionError: registry unreachable"
    assert after.error_at is not None


# -- property: nothing a sender sends is a 5xx; nothing is enqueued without the token ---------------

_auth_values = st.integers(0, 9).flatmap(
    lambda n: (
        st.sampled_from([f"Bearer {WEBHOOK_TOKEN}", WEBHOOK_TOKEN])
        if n < 5
        else st.sampled_from(
            [
                "Bearer ",
                "",
                f"Bearer {WEBHOOK_TOKEN} ",
                f"bearer {WEBHOOK_TOKEN}",
                "Bearer wrong",
                WEBHOOK_TOKEN.upper(),
            ]
        )
        if n < 8
        else st.text(max_size=40)
    )
)
_other_headers = st.dictionaries(
    st.sampled_from(["X-Other", "Content-Length", "User-Agent"]) | st.text(max_size=15),
    st.text(max_size=40),
    max_size=3,
)


@st.composite
def _headers(draw: st.DrawFn) -> dict[str, str]:
    headers = draw(_other_headers)
    if draw(st.booleans()):
        headers[draw(st.sampled_from(["Content-Type", "content-type"]))] = draw(
            st.sampled_from([DISTRIBUTION_V1, "application/json", "text/plain", ""]) | st.text(max_size=30)
        )
    if draw(st.integers(0, 9)) > 1:  # mostly with an Authorization header
        headers[draw(st.sampled_from(["Authorization", "authorization", "AUTHORIZATION"]))] = draw(
            _auth_values
        )
    return headers


_sources = st.integers(0, 9).flatmap(
    lambda n: (
        st.just("distribution")
        if n < 7
        else st.sampled_from(["harbor", "Distribution"]) | st.text(max_size=20)
    )
)
_events = st.fixed_dictionaries(
    {
        "action": st.sampled_from(["push", "pull"]),
        "target": st.fixed_dictionaries(
            {"mediaType": st.just(OCI_INDEX)},
            optional={
                "repository": st.sampled_from(["demo/web", "demo/other", "Bad", ""]) | st.text(max_size=20),
                "tag": st.sampled_from(["stable", "canary", "", "bad tag"]) | st.text(max_size=20),
                "digest": st.sampled_from([D1, D2, HINT, "nonsense"]),
            },
        ),
        "request": st.fixed_dictionaries({}, optional={"host": st.sampled_from(["127.0.0.1:5000", "", "h"])}),
    }
)
_bodies = st.one_of(
    st.binary(max_size=200),
    st.lists(_events, max_size=3).map(lambda evs: json.dumps({"events": evs}).encode()),
    st.lists(_events, min_size=1, max_size=3).map(lambda evs: json.dumps({"events": evs}).encode()),
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(source=_sources, headers=_headers(), body=_bodies)
def test_no_request_is_a_5xx_and_nothing_is_enqueued_without_the_token(
    hook: Harness, source: str, headers: dict[str, str], body: bytes
) -> None:
    sent_before = len(hook.queue.sent)
    result = hook.service.handle(source, headers, body)
    assert 200 <= result.status < 500
    auth = {k.lower(): v for k, v in headers.items()}.get("authorization")
    authenticated = source == "distribution" and auth in (f"Bearer {WEBHOOK_TOKEN}", WEBHOOK_TOKEN)
    event("authenticated" if authenticated else "not authenticated")
    event(f"status {result.status}")
    if not authenticated:
        assert result.status in (401, 404)
        assert len(hook.queue.sent) == sent_before
    for change in hook.queue.sent[sent_before:]:
        assert change.move.image == WEB
        assert change.move.digest == D1  # always the registry's answer
