"""Hostile input at the deployed webhook handler (functions/webhook/app.py, in process, moto):
no 5xx for anything a sender can put in a body, no log line lost to its input, and bounded work
per delivery.

- a lone UTF-16 surrogate (the JSON escape ``"\\ud800"``) in a delivery id is kept (escaped) and
  deduplicates like any id; in a digest or an image it is a 400 naming the field;
- every log line of such a request is written, as JSON;
- a delivery of many events is queued in one request and checked with one lookup of what is
  followed per batch of queued messages (64 KiB each), not one per message nor one per event, and
  one over the limit is a 413 that says the limit.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tagpin import wiring
from tagpin.domain.shards import SHARDS
from tagpin.ports.registry import OCI_MANIFEST
from tagpin.usecases.webhook import MAX_EVENTS, delivery_key

from tests.support.constants import WEB
from tests.support.webhooks import check_queued, deploy_webhook, post_distribution

CONFIG = f"""
clusters:
  dev: {{kubeconfig: {{file: /dev/null}}}}
registries:
  127.0.0.1:5000: {{insecure: true}}
images:
  - image: {WEB}
    targets: [{{cluster: dev, namespace: demo, name: web, container: app}}]
"""


class Calls:
    """Every AWS operation the handler makes (botocore's event system), by name."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, model: Any, **_kwargs: Any) -> None:
        self.names.append(model.name)


@pytest.fixture(autouse=True)
def info_level() -> Iterator[None]:
    """These tests read INFO lines. The function logger is made once per process, at the level of
    whoever imported it first (the local stack runs at WARNING), and gives its level to the
    library's "tagpin" logger: ask both for INFO, and give back what they had."""
    from tagpin.observability import logger as function_logger

    library = logging.getLogger("tagpin")
    levels = function_logger.log_level, library.level
    function_logger.setLevel("INFO")
    library.setLevel(logging.INFO)
    yield
    function_logger.setLevel(levels[0])
    library.setLevel(levels[1])


@pytest.fixture
def webhook(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Calls]]:
    deployed = deploy_webhook(monkeypatch, CONFIG)
    handler = deployed.handler
    calls = Calls()
    wiring.aws("dynamodb").meta.events.register("before-call.dynamodb.*", calls)
    handler.check_queued = lambda: check_queued(handler, deployed.sqs, deployed.notifications)
    yield handler, calls
    wiring.reset()


def envelope(*events: dict[str, Any]) -> bytes:
    return json.dumps({"events": list(events)}).encode()


def push(
    tag: str = "stable", repository: str = "demo/web", digest: str = "sha256:" + "a" * 64, **more: Any
) -> dict[str, Any]:
    return {
        "id": more.pop("id", "evt-1"),
        "action": "push",
        "timestamp": "2026-01-01T00:00:00Z",
        "target": {"mediaType": OCI_MANIFEST, "repository": repository, "tag": tag, "digest": digest},
        "request": {"host": "127.0.0.1:5000"},
        **more,
    }


def test_a_lone_surrogate_in_a_delivery_id_is_no_5xx(webhook) -> None:
    handler, _ = webhook
    body = envelope(push(id="\ud800-delivery"))
    assert b"\\ud800" in body  # the JSON escape of a lone surrogate, as a sender can send it
    # Queued (202); the followed tag's registry is not running here: its check fails and is
    # reported failed, to come back (the claim of the delivery id was taken, then released).
    status, answer = post_distribution(handler, body)
    assert status == 202 and answer == {"queued": 1}, answer
    handed, failed = handler.check_queued()
    assert handed == 1 and len(failed) == 1 and "\\ud800-delivery" in failed[0]


def test_delivery_keys_hash_any_id_and_keep_distinct_ids_distinct() -> None:
    keys = {delivery_key("generic", delivery, WEB) for delivery in ("\ud800", "\\ud800", "\udcff", "x")}
    assert len(keys) == 4 and all(len(k) == 64 for k in keys)


def test_a_surrogate_in_a_digest_or_an_image_is_a_400_naming_the_field(webhook) -> None:
    handler, _ = webhook
    status, answer = post_distribution(handler, envelope(push(digest="sha256:\ud800" + "a" * 63)))
    assert status == 400 and answer["error"].startswith("events[0].digest: not a digest")
    status, answer = post_distribution(handler, envelope(push(tag="st\ud800ble")))
    assert status == 400 and answer["error"].startswith("events[0]: invalid image")
    status, answer = post_distribution(handler, envelope(push(repository="demo/w\udcffeb")))
    assert status == 400 and "invalid image" in answer["error"]


def test_every_log_line_is_written_whatever_the_input(webhook, capsys) -> None:
    """The function's log stream is strict UTF-8, as Lambda's is: a lone surrogate that reached a
    log line unescaped would fail the write (``--- Logging error ---``) and lose the line."""
    from tagpin.observability import logger as function_logger

    handler, _ = webhook
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    previous = function_logger.registered_handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        post_distribution(handler, envelope(push(digest="sha256:\ud800" + "a" * 63, id="\udcff")))
        post_distribution(
            handler, envelope(push(id="\ud800"))
        )  # followed: queued, then resolved (failing: no registry)
        handler.check_queued()
    finally:
        function_logger.registered_handler.setStream(previous)  # type: ignore[attr-defined]
    assert "Logging error" not in capsys.readouterr().err
    lines = [json.loads(line) for line in stream.buffer.getvalue().decode("utf-8").splitlines()]  # type: ignore[attr-defined]
    rejected = [line for line in lines if line.get("message") == "webhook rejected"]
    assert len(rejected) == 1 and "sha256:\\\\ud800" in rejected[0]["reason"]  # the surrogate, escaped
    assert any(line["message"] == "resolve failed; keeping the working digest" for line in lines)


def test_the_function_logger_writes_any_string(capsys) -> None:
    """Whatever reaches a log line (the library logs untrusted text in many places), the line is
    written, as JSON that decodes back to the same text."""
    from tagpin.observability import logger as function_logger

    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    previous = function_logger.registered_handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        function_logger.info("untrusted", extra={"digest": "sha256:\ud800", "who": "déjà \udcff"})
        logging.getLogger("tagpin.usecases.webhook").warning("library line", extra={"reason": "\ud83d"})
    finally:
        function_logger.registered_handler.setStream(previous)  # type: ignore[attr-defined]
    assert "Logging error" not in capsys.readouterr().err
    first, second = (json.loads(line) for line in stream.buffer.getvalue().decode("utf-8").splitlines())  # type: ignore[attr-defined]
    assert (first["digest"], first["who"]) == ("sha256:\ud800", "déjà \udcff")
    assert second["reason"] == "\ud83d" and second["name"] == "tagpin.usecases.webhook"


def test_many_unfollowed_events_cost_one_lookup_not_one_each(webhook) -> None:
    handler, calls = webhook
    events = [push(repository=f"team/app{i}", id=f"e{i}") for i in range(MAX_EVENTS)]
    status, answer = post_distribution(handler, envelope(*events))
    assert status == 202 and answer == {"queued": MAX_EVENTS}
    assert calls.names == []  # queued, nothing looked up yet
    # queued as a few messages of at most 64 KiB (one SendMessageBatch), checked in one batch
    handed, failed = handler.check_queued()
    assert 1 < handed <= 10 and failed == []
    # the index, once for the batch: one Query per shard (not one lookup per message, nor 1,000
    # queries, one per event); nothing followed, so no state is read
    assert calls.names.count("Query") <= SHARDS, calls.names
    assert len(calls.names) <= SHARDS + 1


def test_more_events_than_the_limit_is_a_413_that_says_the_limit(webhook) -> None:
    handler, calls = webhook
    events = [push(repository=f"team/app{i}", id=f"e{i}") for i in range(MAX_EVENTS + 1)]
    status, answer = post_distribution(handler, envelope(*events))
    assert status == 413 and f"the limit is {MAX_EVENTS}" in answer["error"]
    assert calls.names == []  # decided before anything is looked up


surrogate_text = st.text(
    alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0xFFFF, exclude_categories=()),
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    delivery=surrogate_text,
    tag=surrogate_text,
    repository=surrogate_text,
    digest=surrogate_text,
    header=surrogate_text,
)
def test_any_string_in_any_field_is_a_2xx_or_4xx_and_logged(
    webhook, capsys, delivery: str, tag: str, repository: str, digest: str, header: str
) -> None:
    handler, _ = webhook
    body = envelope(push(tag=tag or "x", repository=repository or "x", digest=digest, id=delivery))
    safe_header = header.encode("utf-8", "backslashreplace").decode("latin-1", "replace")
    status, _answer = post_distribution(handler, body, {"x-anything": safe_header})
    assert 200 <= status < 500
    handler.check_queued()  # checked (or reported failed), never raising
    assert "Logging error" not in capsys.readouterr().err
