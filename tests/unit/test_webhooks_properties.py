"""Property tests: for every source, nothing a sender can send is a 5xx, and nothing is enqueued
without valid credentials; what is enqueued is always the registry's digest for a followed tag.

Bodies are the samples mutated (values replaced by other JSON values, keys dropped, unicode and
injection attempts in names), truncated, or arbitrary bytes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tagpin.adapters.webhooks.auth import SourceSecret
from tagpin.adapters.webhooks.sources import SOURCES
from tagpin.ports.state import State
from tagpin.ports.webhooks import WebhookError

from tests.support.constants import D1, STATE_TABLE
from tests.support.webhooks import (
    FOLLOWED,
    SAMPLE_NAMES,
    Hook,
    checked_all,
    http_parts,
    sample,
    secret,
)

NASTY = [
    "",
    "demo/web",
    "Demo/Web",
    "stable",
    "../../etc/passwd",
    "demo/web:stable@sha256:" + "a" * 64,
    "127.0.0.1:5000/demo/web",
    "a" * 300,
    "\u0000",
    "déjà/vu",
    "${jndi:ldap://x}",
    "'; DROP TABLE x; --",
    "<script>",
    "sha256:" + "g" * 64,
    "\ud800",
]
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.sampled_from(NASTY),
    st.text(max_size=30),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def mutate(data: st.DataObject, value: Any, depth: int = 0) -> Any:
    choice = data.draw(st.integers(0, 9))
    if choice == 0 and depth > 0:
        return data.draw(json_value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if data.draw(st.integers(0, 14)) == 0:
                continue  # drop the key
            out[key] = mutate(data, item, depth + 1)
        return out
    if isinstance(value, list):
        return [mutate(data, item, depth + 1) for item in value]
    return value


def body_of(name: str) -> tuple[str, dict[str, str], bytes, dict[str, str]]:
    source, event_, _ = sample(name)
    if source == "ecr":
        return source, {}, json.dumps(event_).encode(), {}
    return http_parts(event_)


@st.composite
def bodies(draw: st.DrawFn, name: str) -> bytes:
    _, _, body, _ = body_of(name)
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind == 1:
        return body[: draw(st.integers(0, len(body)))]  # truncated
    if kind == 2:
        return json.dumps(draw(json_value)).encode()
    try:
        document = json.loads(body)
    except ValueError:
        return body
    data = draw(st.data())
    return json.dumps(mutate(data, copy.deepcopy(document))).encode()


PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_parser_returns_events_or_a_4xx(name: str, data: st.DataObject) -> None:
    source, headers, _, _ = body_of(name)
    body = data.draw(bodies(name))
    entry = secret().get(source)
    options = SourceSecret.model_validate(entry).options if isinstance(entry, dict) else None
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        events = SOURCES[source].parse(body, lowered, *([options] if options else []))
    except WebhookError as exc:
        event(f"{exc.status}")
        assert 400 <= exc.status < 500
        return
    event("parsed")
    assert isinstance(events, list)


@pytest.fixture
def hook(store: State, dynamodb: Any) -> Hook:
    return Hook(store, dynamodb, STATE_TABLE)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, dict[str, str], bytes, dict[str, str], bool]:
    """(source, headers, body, query, credentials kept) from a sample, possibly mutated."""
    name = draw(st.sampled_from([n for n in SAMPLE_NAMES if n != "ecr"]))
    source, headers, _, query = body_of(name)
    body = draw(bodies(name))
    keep = draw(st.booleans())
    if not keep:
        headers = {k: v for k, v in headers.items() if draw(st.booleans()) or k in ("content-type",)}
        headers = {k: (draw(st.text(max_size=20)) if draw(st.booleans()) else v) for k, v in headers.items()}
        query = {k: draw(st.text(max_size=20)) for k in query} if draw(st.booleans()) else {}
    if draw(st.integers(0, 9)) == 0:
        source = draw(st.sampled_from([*SOURCES, "", "GitHub", "../x"]) | st.text(max_size=12))
    return source, headers, body, query, keep


@PROPERTY_SETTINGS
@given(request=requests())
def test_service_never_answers_5xx_and_enqueues_only_the_registry_digest(
    hook: Hook, request: tuple[str, dict[str, str], bytes, dict[str, str], bool]
) -> None:
    source, headers, body, query, _ = request
    before = len(hook.queue.sent)
    result = hook.post(source, headers, body, query)
    event(f"status {result.status}")
    assert result.status in (202, 400, 401, 404, 415)
    if result.status != 202:
        assert hook.notifications.bodies == []  # refused: never queued
    checked_all(hook.service, hook.notifications)  # the queued stage (the registry answers D1)
    if result.status != 202:
        assert len(hook.queue.sent) == before
    for change in hook.queue.sent[before:]:
        assert change.move.image in FOLLOWED
        assert change.move.digest == D1


@PROPERTY_SETTINGS
@given(body=bodies("ecr"))
def test_eventbridge_path_never_raises(hook: Hook, body: bytes) -> None:
    result = hook.service.handle_trusted("ecr", body)
    assert result.status in (202, 400)
    assert all(c.move.digest == D1 for c in hook.queue.sent)


@PROPERTY_SETTINGS
@given(
    source=st.sampled_from(sorted(set(SOURCES) - {"ecr"})),
    body=st.binary(max_size=300),
    query=st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=2),
)
def test_without_credentials_nothing_is_resolved_or_enqueued(
    hook: Hook, source: str, body: bytes, query: dict[str, str]
) -> None:
    query.pop("token", None)
    result = hook.post(source, {"content-type": "application/json"}, body, query)
    assert result.status == 401
    assert hook.queue.sent == [] and hook.resolver.calls == []
