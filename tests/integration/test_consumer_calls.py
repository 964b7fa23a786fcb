"""The AWS calls the consumer makes for one change (a push of a followed tag with one target),
counted through botocore as its handler makes them on the local stack: what each costs per push
and what the storm's moto server serves. Every call is named with why it is made; a new one (or a
read made twice) shows here."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.client
import pytest
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin_local.lambda_runtime import sqs_event
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

pytestmark = pytest.mark.integration

# One change, one target, rollout.verify on (the default), no waves: 11 calls (9 of DynamoDB;
# 10 before the promotion's start took its history item into one transaction, 14 before the two
# other transactions, 15 before the tag's state was read with the targets'). Three are
# transactions (the start with its STARTED history item; a target's outcome with its history
# item; a notice with its image history item): each was two writes before, which a process could
# die between.
ONE_CHANGE = Counter(
    {
        "dynamodb.Query": 1,  # the index: the tag's discovered targets (followed)
        "dynamodb.PutItem": 1,  # the idempotency record (conditional: in progress)
        # the tag's state (a digest marked bad: admission of the move) with the targets' states
        # (admission), one request; the target's claim read again after the workload's GET
        "dynamodb.BatchGetItem": 2,
        # the claim (conditional), the idempotency record (completed)
        "dynamodb.UpdateItem": 2,
        # the promotion started (conditional) with its STARTED history item; the outcome
        # (conditional) with the target's history item; the APPLIED notice claimed once
        # (conditional) with the image's history item
        "dynamodb.TransactWriteItems": 3,
        "sqs.SendMessage": 1,  # the verification
        "sns.Publish": 1,  # the APPLIED notification
    }
)


@contextmanager
def aws_calls(st: LocalStack) -> Iterator[Counter[str]]:
    """The calls made meanwhile, but the stack's own (its SQS loops: the notifications queue's
    event source receives in the background, whatever the test does)."""
    counted: Counter[str] = Counter()
    lock = threading.Lock()
    original = botocore.client.BaseClient._make_api_call
    own = {id(st.client(service)) for service in ("sqs", "dynamodb", "sns", "lambda")}

    def counting(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if id(client) not in own:
            with lock:
                counted[f"{client.meta.service_model.service_name}.{operation}"] += 1
        return original(client, operation, params)

    botocore.client.BaseClient._make_api_call = counting  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]


def change_event(st: LocalStack, change: Change) -> dict[str, Any]:
    now = str(int(time.time() * 1000))
    message = {
        "MessageId": str(uuid.uuid4()),
        "ReceiptHandle": str(uuid.uuid4()),
        "Body": change.model_dump_json(),
        "MD5OfBody": "0" * 32,
        "Attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": now,
            "SequenceNumber": str(10**19),
            "MessageGroupId": change.move.image,
            "MessageDeduplicationId": uuid.uuid4().hex,
            "SenderId": "AIDAEXAMPLE",
            "ApproximateFirstReceiveTimestamp": now,
        },
    }
    return sqs_event([message], st.queue_arn)


def test_one_change_costs_the_consumer_these_calls(stack: LocalStack) -> None:
    consumer = stack.functions["consumer"]
    # warm: the configuration read (and cached) by a change of a tag nobody follows
    unfollowed = Move(
        image="example.com/none:x", digest="sha256:" + "0" * 64, observed_at=1, trigger=Trigger.MANUAL
    )
    assert consumer.invoke(change_event(stack, Change(move=unfollowed))) == {"batchItemFailures": []}
    digest = push_image(stack.registry.url, "demo/web", "stable")
    image = f"{stack.registry.host}/demo/web:stable"
    move = Move(image=image, digest=digest, observed_at=int(time.time() * 1000), trigger=Trigger.MANUAL)
    with aws_calls(stack) as counted:
        assert consumer.invoke(change_event(stack, Change(move=move))) == {"batchItemFailures": []}
    container = stack.kube.get("Deployment", "default", "web")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{image}@{digest}"
    assert counted == ONE_CHANGE, sorted(counted.items())
