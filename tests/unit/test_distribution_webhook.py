"""The CNCF distribution notification parser: what it keeps, what it drops, what it refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tagpin.adapters.webhooks.distribution import MANIFEST_TYPES, parse
from tagpin.adapters.webhooks.sources import SOURCES
from tagpin.ports.registry import DOCKER_MANIFEST_V2, OCI_INDEX
from tagpin.ports.webhooks import PushEvent, WebhookError

from tests.support.constants import DISTRIBUTION_V1, DISTRIBUTION_V2
from tests.support.webhooks import envelope

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST_DIGEST = "sha256:" + "d" * 64


def event(
    *,
    action: str = "push",
    media_type: str = OCI_INDEX,
    repository: str | None = "demo/web",
    tag: str | None = "stable",
    digest: str | None = MANIFEST_DIGEST,
    host: str | None = "127.0.0.1:5000",
    event_id: str = "e-1",
) -> dict[str, Any]:
    target: dict[str, Any] = {"mediaType": media_type, "size": 1234, "digest": digest}
    if repository is not None:
        target["repository"] = repository
    if tag is not None:
        target["tag"] = tag
    request: dict[str, Any] = {"id": "r-1", "method": "PUT", "useragent": "docker/27"}
    if host is not None:
        request["host"] = host
    return {
        "id": event_id,
        "timestamp": "2026-11-21T05:00:00.000000000Z",
        "action": action,
        "target": target,
        "request": request,
        "actor": {"name": "ci"},
        "source": {"addr": "registry:5000"},
    }


def headers(content_type: str | None = DISTRIBUTION_V1) -> dict[str, str]:
    return {} if content_type is None else {"content-type": content_type}


def test_registered_as_distribution() -> None:
    assert SOURCES["distribution"].parse is parse


@pytest.mark.parametrize(
    "content_type",
    [
        DISTRIBUTION_V1,
        DISTRIBUTION_V2,
        "application/json",
        f"{DISTRIBUTION_V1}; charset=utf-8",
        DISTRIBUTION_V1.upper(),
        None,
        "",
    ],
)
def test_accepted_media_types(content_type: str | None) -> None:
    (push,) = parse(envelope(event()), headers(content_type))
    assert push == PushEvent(
        registry="127.0.0.1:5000",
        repository="demo/web",
        tag="stable",
        digest=MANIFEST_DIGEST,
        event_time="2026-11-21T05:00:00.000000000Z",
        delivery_id="e-1",
    )


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/xml", "application/x-www-form-urlencoded"]
)
def test_other_content_types_are_415(content_type: str) -> None:
    with pytest.raises(WebhookError) as info:
        parse(envelope(event()), headers(content_type))
    assert info.value.status == 415
    assert content_type in info.value.message


@pytest.mark.parametrize("media_type", sorted(MANIFEST_TYPES))
def test_every_manifest_type_is_kept(media_type: str) -> None:
    assert len(parse(envelope(event(media_type=media_type)), headers())) == 1


@pytest.mark.parametrize(
    "dropped",
    [
        pytest.param(event(media_type=LAYER_TYPE, tag=None), id="blob-push"),
        pytest.param(event(media_type="application/octet-stream", tag=None), id="blob-octet"),
        pytest.param(event(action="pull"), id="manifest-pull"),
        pytest.param(event(action="delete"), id="delete"),
        pytest.param(event(action="mount", media_type=LAYER_TYPE), id="blob-mount"),
        pytest.param(event(tag=None), id="digest-only-push"),
        pytest.param(event(tag=""), id="empty-tag"),
        pytest.param(event(tag=None, repository=None, host=None), id="digest-only-without-host"),
    ],
)
def test_dropped_events(dropped: dict[str, Any]) -> None:
    assert parse(envelope(dropped), headers()) == []


def test_several_events_per_envelope_keep_their_order() -> None:
    body = envelope(
        event(media_type=LAYER_TYPE, tag=None, event_id="blob"),
        event(tag="stable", event_id="a"),
        event(tag=None, media_type=DOCKER_MANIFEST_V2, event_id="child"),
        event(action="pull", event_id="pull"),
        event(repository="demo/api", tag="1.2", digest=None, event_id="b"),
        event(host="registry.example.com", tag="latest", event_id="c"),
    )
    pushes = parse(body, headers(DISTRIBUTION_V2))
    assert [(p.registry, p.repository, p.tag, p.digest, p.delivery_id) for p in pushes] == [
        ("127.0.0.1:5000", "demo/web", "stable", MANIFEST_DIGEST, "a"),
        ("127.0.0.1:5000", "demo/api", "1.2", None, "b"),
        ("registry.example.com", "demo/web", "latest", MANIFEST_DIGEST, "c"),
    ]


def test_empty_event_list() -> None:
    assert parse(b'{"events": []}', headers()) == []


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        pytest.param(event(host=None), "request.host", id="missing-host"),
        pytest.param(event(host=""), "request.host", id="empty-host"),
        pytest.param(event(repository=None), "target.repository", id="missing-repository"),
    ],
)
def test_tagged_manifest_push_without_host_or_repository_is_400(bad: dict[str, Any], where: str) -> None:
    with pytest.raises(WebhookError) as info:
        parse(envelope(event(event_id="ok"), bad), headers())
    assert info.value.status == 400
    assert "events[1]" in info.value.message
    assert where in info.value.message


def test_missing_request_object_is_400() -> None:
    bad = event()
    del bad["request"]
    with pytest.raises(WebhookError) as info:
        parse(envelope(bad), headers())
    assert info.value.status == 400


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"\xff\xfe\x00garbage",
        b"[]",
        b'"events"',
        b"{}",
        b'{"events": {}}',
        b'{"events": null}',
        b'{"events": [1]}',
        b'{"events": [{"action": "push", "target": [], "request": {}}]}',
        b'{"events": [{"action": "push", "target": {}, "request": "x"}]}',
        b"[" * 100_000,
        b'{"events": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
)
def test_malformed_bodies_are_400(body: bytes) -> None:
    with pytest.raises(WebhookError) as info:
        parse(body, headers())
    assert info.value.status == 400


# -- property: nothing a sender sends escapes as anything but a 4xx WebhookError -------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
_json = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
_field_values = st.one_of(
    st.none(),
    st.sampled_from(
        ["push", "pull", "delete", OCI_INDEX, DOCKER_MANIFEST_V2, LAYER_TYPE, "127.0.0.1:5000", "demo/web"]
    ),
    _json,
)
_events = st.fixed_dictionaries(
    {},
    optional={
        "action": _field_values,
        "id": _field_values,
        "timestamp": _field_values,
        "target": st.fixed_dictionaries(
            {},
            optional={
                "mediaType": _field_values,
                "repository": _field_values,
                "tag": _field_values,
                "digest": _field_values,
            },
        )
        | _json,
        "request": st.fixed_dictionaries({}, optional={"host": _field_values}) | _json,
    },
)
_bodies = st.one_of(
    st.binary(max_size=300),
    _json.map(lambda v: json.dumps(v).encode()),
    st.lists(_events | _json, max_size=5).map(lambda evs: json.dumps({"events": evs}).encode()),
)
_content_types = st.one_of(
    st.none(),
    st.sampled_from([DISTRIBUTION_V1, DISTRIBUTION_V2, "application/json", "text/plain", ""]),
    st.text(max_size=30),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_bodies, content_type=_content_types)
def test_parser_returns_events_or_a_4xx_error(body: bytes, content_type: str | None) -> None:
    try:
        result = parse(body, headers(content_type))
    except WebhookError as exc:
        assert 400 <= exc.status < 500
        assert exc.message
        return
    assert isinstance(result, list)
    for push in result:
        assert isinstance(push, PushEvent)
        assert isinstance(push.registry, str) and push.registry
        assert isinstance(push.repository, str) and push.repository
        assert isinstance(push.tag, str) and push.tag
        assert push.digest is None or isinstance(push.digest, str)
