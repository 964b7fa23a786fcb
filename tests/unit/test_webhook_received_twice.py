"""The deployed webhook handler (functions/webhook/app.py, in process, over moto's SQS and
DynamoDB) handed one queued notification twice, as SQS may: the second receive, while the first
check still holds the delivery's claim, is a check of its own, not a duplicate; when it fails too
(the registry unreachable) it is reported failed, so the message is not deleted and comes back. A
message received again after a check that succeeded puts one change on the FIFO changes queue."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin import wiring
from tagpin.adapters.dynamodb.deliveries import DeliveryStore
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import OCI_MANIFEST, Resolution
from tagpin.usecases.detect import Detector
from tagpin_local.lambda_events import sqs_event
from tagpin_local.lambda_runtime import LocalContext

from tests.support.constants import D1
from tests.support.firsthold import HeldFirst
from tests.support.webhooks import (
    UNREACHABLE,
    UNREACHABLE_CONFIG,
    Deployed,
    deploy_webhook,
    post_distribution,
)


@pytest.fixture
def webhook(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    yield deploy_webhook(monkeypatch, UNREACHABLE_CONFIG)
    wiring.reset()


def queued_twice(deployed: Deployed) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One notification posted, then its message received twice (the first receive's visibility
    over at once): the two receives, one message each, with their own receipt handles."""
    body = json.dumps(
        {
            "events": [
                {
                    "id": "d-1",
                    "action": "push",
                    "target": {
                        "mediaType": OCI_MANIFEST,
                        "repository": "demo/web",
                        "tag": "stable",
                        "digest": D1,
                    },
                    "request": {"host": UNREACHABLE},
                }
            ]
        }
    ).encode()
    assert post_distribution(deployed.handler, body)[0] == 202
    receives = []
    for visibility in (0, 60):
        receives.append(
            deployed.sqs.receive_message(
                QueueUrl=deployed.notifications,
                MaxNumberOfMessages=10,
                VisibilityTimeout=visibility,
                MessageSystemAttributeNames=["All"],
            )["Messages"]
        )
    (first,), (second,) = receives
    assert first["MessageId"] == second["MessageId"] and first["ReceiptHandle"] != second["ReceiptHandle"]
    return receives[0], receives[1]


def handed(deployed: Deployed, messages: list[dict[str, Any]]) -> set[str]:
    """``messages`` through the handler as Lambda's event source does: those not reported failed
    deleted (with this receive's receipt handle); the ids of those reported failed."""
    arn = deployed.sqs.get_queue_attributes(QueueUrl=deployed.notifications, AttributeNames=["QueueArn"])
    event = sqs_event(messages, arn["Attributes"]["QueueArn"])
    response = deployed.handler(event, LocalContext("tagpin-webhook", timeout_s=15))
    failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
    for m in messages:
        if m["MessageId"] not in failed:
            deployed.sqs.delete_message(QueueUrl=deployed.notifications, ReceiptHandle=m["ReceiptHandle"])
    return failed


def on(sqs: Any, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    return sum(
        int(v) for v in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"].values()
    )


def test_a_message_received_again_while_its_check_runs_is_not_deleted(
    webhook: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = queued_twice(webhook)
    # the first receive's registry answers once the second receive is done (the invocation's budget
    # stops waiting for it after 12 s in any case)
    held = HeldFirst(DeliveryStore.claim_delivery, Detector.resolve, timeout_s=30)
    monkeypatch.setattr(DeliveryStore, "claim_delivery", lambda self, *a: held.claim(self, *a))
    monkeypatch.setattr(Detector, "resolve", lambda self, *a, **k: held.resolve(self, *a, **k))
    failures: list[set[str]] = []
    running = threading.Thread(target=lambda: failures.append(handed(webhook, first)))
    running.start()
    held.wait()  # the first check holds the claim and its registry was asked (not answered yet)
    try:
        again = handed(webhook, second)
    finally:
        held.release()
        running.join(30)
    message = first[0]["MessageId"]
    assert again == {message}, "the second receive dropped the message as a duplicate of its own claim"
    assert failures == [{message}]
    assert on(webhook.sqs, webhook.notifications) == 1  # it comes back
    assert on(webhook.sqs, webhook.changes) == 0


def test_a_message_received_again_after_its_check_puts_one_change(
    webhook: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answered(self: Detector, followed: Any, **_: Any) -> Resolution:
        ref: ImageRef = followed.ref
        return Resolution(ref=ref, digest=D1, media_type=OCI_MANIFEST, method="HEAD")  # type: ignore[arg-type]

    monkeypatch.setattr(Detector, "resolve", answered)
    first, second = queued_twice(webhook)
    arn = webhook.sqs.get_queue_attributes(QueueUrl=webhook.notifications, AttributeNames=["QueueArn"])
    event = sqs_event(first, arn["Attributes"]["QueueArn"])  # checked; its deletion did not take
    assert webhook.handler(event, LocalContext("tagpin-webhook", timeout_s=15))["batchItemFailures"] == []
    assert handed(webhook, second) == set()
    assert on(webhook.sqs, webhook.notifications) == 0
    changes = webhook.sqs.receive_message(QueueUrl=webhook.changes, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["move"]["digest"] for m in changes] == [D1]
