"""The AWS calls the webhook's queued stage (the check) makes for one push of a followed tag,
counted through botocore as its handler makes them on the local stack (a batch of one queued
notification, the usual push): what each costs per push and what the storm's moto server serves.
Every call is named with why it is made; a new one (or a read made twice) shows here. The
consumer's are counted in test_consumer_calls."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from tagpin.ports.webhooks import Notification, PushEvent
from tagpin_local.lambda_runtime import sqs_event
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

from tests.integration.test_consumer_calls import aws_calls

pytestmark = pytest.mark.integration

# One queued notification of one followed tag that moved (its digest confirmed by the registry):
ONE_PUSH = Counter(
    {
        # what is followed: the tag's index entries (its shard), and the version channels of its
        # repository (the repository's shard: another partition)
        "dynamodb.Query": 2,
        "dynamodb.PutItem": 1,  # the delivery's claim (conditional: a replay is a duplicate)
        # the tag's move (conditional on the observation's order), then its tombstone in the
        # settled digests (a steady poll must not take the old digest for the tag's)
        "dynamodb.UpdateItem": 2,
        "dynamodb.BatchGetItem": 1,  # the targets' states (the level), beside the move's write
        "sqs.SendMessage": 1,  # the change
    }
)


def notification_event(st: LocalStack, event: PushEvent) -> dict[str, Any]:
    message = {
        "MessageId": str(uuid.uuid4()),
        "ReceiptHandle": str(uuid.uuid4()),
        "Body": Notification("generic", (event,), "calls").to_json(),
        "MD5OfBody": "0" * 32,
        "Attributes": {"ApproximateReceiveCount": "1"},
    }
    return sqs_event([message], st.notifications_arn)


def test_one_push_costs_the_check_these_calls(stack: LocalStack) -> None:
    webhook = stack.functions["webhook"]
    assert stack.registry is not None
    host = stack.registry.host
    # warm: the configuration read (and cached) by a notification of a tag nobody follows
    other = PushEvent(host, "demo/none", "x", None, None, "warm")
    assert webhook.invoke(notification_event(stack, other)) == {"batchItemFailures": []}
    digest = push_image(stack.registry.url, "demo/web", "stable")
    pushed = PushEvent(host, "demo/web", "stable", digest, None, uuid.uuid4().hex)
    with aws_calls(stack) as counted:
        assert webhook.invoke(notification_event(stack, pushed)) == {"batchItemFailures": []}
    assert counted == ONE_PUSH, sorted(counted.items())
    # the change it enqueued is the push's
    sqs = stack.client("sqs")
    messages = sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10).get("Messages", [])
    assert [digest in m["Body"] for m in messages] == [True]
