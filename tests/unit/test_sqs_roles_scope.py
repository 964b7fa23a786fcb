"""The functions with an SQS event source (the webhook, whose HTTP route is public; the consumer;
the write-back) read, delete and inspect messages of their own queue only. Their roles as SAM makes
them (``tests.support.iamroles.role``: the template's statements plus what SAM attaches, here
``AWSLambdaSQSQueueExecutionRole`` for an SQS event) are asked about a queue of another application
of the account and about the stack's dead-letter queue. SAM's policy grants them on every queue;
the template's permissions boundary (``StackQueuesBoundary``) keeps them to the stack's own."""

from __future__ import annotations

import pytest

from tests.support.iam import Request
from tests.support.iamroles import role

ACCOUNT = "123456789012"
QUEUE = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/tagpin-changes.fifo"
ENV = {
    "TAGPIN_STATE_TABLE": "tagpin-state",
    "TAGPIN_IDEMPOTENCY_TABLE": "tagpin-idempotency",
    "TAGPIN_QUEUE_URL": QUEUE,
    "TAGPIN_NOTIFICATIONS_QUEUE_URL": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/tagpin-notifications",
    "TAGPIN_NOTIFY_TOPIC_ARN": f"arn:aws:sns:us-east-1:{ACCOUNT}:tagpin-rollouts",
    "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
    "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook",
    "TAGPIN_WRITEBACK_QUEUE_URL": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/tagpin-writeback.fifo",
}
OWN = {
    "webhook": f"arn:aws:sqs:us-east-1:{ACCOUNT}:tagpin-notifications",
    "consumer": f"arn:aws:sqs:us-east-1:{ACCOUNT}:tagpin-changes.fifo",
    "writeback": f"arn:aws:sqs:us-east-1:{ACCOUNT}:tagpin-writeback.fifo",
}
OTHERS = [
    f"arn:aws:sqs:us-east-1:{ACCOUNT}:payments-orders",  # another application's queue
    # what the console redrives (tests.support.iamroles names each resource tagpin-<logical id>)
    f"arn:aws:sqs:us-east-1:{ACCOUNT}:tagpin-ChangesDeadLetterQueue",
]
ACTIONS = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]


@pytest.mark.parametrize("function", sorted(OWN))
def test_each_reads_its_own_queue(function: str) -> None:
    granted = role(function, ENV, {"GitWriteBack": "enabled"})
    assert all(granted.allowed(Request(action, OWN[function])) for action in ACTIONS)


@pytest.mark.parametrize("queue", OTHERS)
@pytest.mark.parametrize("function", sorted(OWN))
def test_none_reads_or_deletes_another_queues_messages(function: str, queue: str) -> None:
    granted = role(function, ENV, {"GitWriteBack": "enabled"})
    allowed = [action for action in ACTIONS if granted.allowed(Request(action, queue))]
    assert allowed == [], f"{function} may {allowed} on {queue}"
