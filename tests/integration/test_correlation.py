"""A correlation id travels from the webhook delivery through the queue to the patch."""

from __future__ import annotations

import io
import json
import logging

import pytest
from tagpin.observability import logger
from tagpin_local.oci import push_image

from tests.support.constants import EVENTS
from tests.support.stack import notifications_checked

pytestmark = pytest.mark.integration


def log_lines(text: str) -> list[dict]:
    lines = []
    for line in text.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return [x for x in lines if isinstance(x, dict) and "level" in x]


@pytest.fixture
def consumer_logs():
    """What the rollout module logs, formatted by powertools as in Lambda (JSON with the
    correlation id), at INFO: the local stack itself logs at WARNING."""
    domain = logging.getLogger("tagpin")  # the domain modules' loggers propagate here
    formatter = next(h.formatter for h in domain.handlers if h.formatter is not None)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    loggers = [domain, logging.getLogger("tagpin.usecases.apply")]
    levels = [x.level for x in loggers]
    domain.addHandler(handler)
    for x in loggers:
        x.setLevel(logging.INFO)
    yield stream
    domain.removeHandler(handler)
    for x, level in zip(loggers, levels, strict=True):
        x.setLevel(level)


def test_the_webhook_request_id_reaches_the_consumer_logs(stack, consumer_logs):
    push_image(stack.registry.url, "demo/web", "stable")
    event = json.loads(
        (EVENTS / "webhook-distribution.json")
        .read_text()
        .replace("127.0.0.1:5000", stack.registry.host)
        .replace("local-dev-webhook-token", stack.webhook_token)
    )
    request_id = "corr-" + stack.registry.host.replace(":", "-")
    event["requestContext"]["requestId"] = request_id
    assert stack.functions["webhook"].invoke(event)["statusCode"] == 202
    notifications_checked(stack)  # the queued stage carried the request id to the change
    # The local functions share one process and one logger: forget the webhook's id, as a separate
    # Lambda container would never have had it.
    logger.set_correlation_id("another-container")
    assert stack.consume_once(wait_s=1) == 1
    out = consumer_logs.getvalue()
    applied = [x for x in log_lines(out) if x.get("message") == "applied"]
    assert applied, "the consumer logged no applied change: " + out[-2000:]
    assert {x.get("function_name") for x in applied} == {"tagpin-consumer"}
    # Which webhook, the sender's delivery id (the distribution event's id), the API request id.
    delivery = json.loads(event["body"])["events"][0]["id"]
    assert {x.get("correlation_id") for x in applied} == {f"webhook:distribution/{delivery}/{request_id}"}
