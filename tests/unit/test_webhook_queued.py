"""The deployed webhook handler's two stages (functions/webhook/app.py, in process, moto): an HTTP
delivery is queued on the notifications queue and answered before its check; the handler's SQS
stage checks a batch side by side and reports only the records whose check failed; a malformed
message among them is dropped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin import wiring
from tagpin.ports.registry import OCI_MANIFEST

from tests.support.webhooks import (
    UNREACHABLE,
    UNREACHABLE_CONFIG,
    check_queued,
    deploy_webhook,
    post_distribution,
)


@pytest.fixture
def webhook(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any, str, str]]:
    deployed = deploy_webhook(monkeypatch, UNREACHABLE_CONFIG)
    yield deployed.handler, deployed.sqs, deployed.notifications, deployed.changes
    wiring.reset()


def push(repository: str, delivery: str) -> dict[str, Any]:
    return {
        "id": delivery,
        "action": "push",
        "target": {
            "mediaType": OCI_MANIFEST,
            "repository": repository,
            "tag": "stable",
            "digest": "sha256:" + "a" * 64,
        },
        "request": {"host": UNREACHABLE},
    }


def visible(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


def test_the_answer_is_the_queueing_and_the_check_comes_after(webhook) -> None:
    handler, sqs, notifications, changes = webhook
    status, answer = post_distribution(handler, json.dumps({"events": [push("demo/web", "d-1")]}).encode())
    assert (status, answer) == (202, {"queued": 1})  # its registry unreachable: answered anyway
    assert visible(sqs, notifications) == 1 and visible(sqs, changes) == 0


def test_a_malformed_notification_is_a_400_and_never_queued(webhook) -> None:
    handler, sqs, notifications, _ = webhook
    for body in (b"{", json.dumps({"events": [push("Demo/Web", "d-2")]}).encode()):
        status, answer = post_distribution(handler, body)
        assert status == 400, answer
    assert visible(sqs, notifications) == 0


def test_a_batch_with_one_failing_check_reports_only_that_one(webhook) -> None:
    handler, sqs, notifications, changes = webhook
    # three deliveries in one batch: the followed tag's check fails (its registry is unreachable),
    # two unfollowed ones are checked (ignored)
    for repository, delivery in (("team/a", "d-3"), ("demo/web", "d-4"), ("team/b", "d-5")):
        assert (
            post_distribution(handler, json.dumps({"events": [push(repository, delivery)]}).encode())[0]
            == 202
        )
    handed, failed = check_queued(handler, sqs, notifications)
    assert handed == 3
    assert [json.loads(body)["events"][0]["delivery_id"] for body in failed] == ["d-4"]
    assert visible(sqs, notifications) == 1 and visible(sqs, changes) == 0  # it comes back


def test_a_message_that_is_not_a_notification_is_dropped_not_retried(webhook) -> None:
    handler, sqs, notifications, _ = webhook
    sqs.send_message(QueueUrl=notifications, MessageBody="not what the webhook queues")
    assert check_queued(handler, sqs, notifications) == (1, [])
    assert visible(sqs, notifications) == 0


def test_a_batch_of_good_and_malformed_messages_drops_only_the_malformed(webhook) -> None:
    handler, sqs, notifications, changes = webhook
    for repository, delivery in (("team/a", "d-6"), ("demo/web", "d-7")):
        assert (
            post_distribution(handler, json.dumps({"events": [push(repository, delivery)]}).encode())[0]
            == 202
        )
    sqs.send_message(QueueUrl=notifications, MessageBody='{"v": 1, "source": "distribution"}')
    sqs.send_message(QueueUrl=notifications, MessageBody="not what the webhook queues")
    handed, failed = check_queued(handler, sqs, notifications)
    # the followed tag's check fails (its registry is unreachable) and it alone comes back; the
    # unfollowed one is checked (ignored); the two malformed are answered 400 and dropped
    assert handed == 4
    assert [json.loads(body)["events"][0]["delivery_id"] for body in failed] == ["d-7"]
    assert visible(sqs, notifications) == 1 and visible(sqs, changes) == 0
