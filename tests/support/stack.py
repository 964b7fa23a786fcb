"""Helpers over the local stack (``tagpin_local.stack.LocalStack``) for the integration and e2e tests."""

from __future__ import annotations

from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.ports.state import State
from tagpin_local.stack import LocalStack

from tests.support.constants import STATE_TABLE


def drain(st: LocalStack) -> None:
    """Run the consumer until the changes queue is empty."""
    while st.consume_once(wait_s=0):
        pass


def state_of(st: LocalStack) -> State:
    """The stack's state table, through the production repositories."""
    return dynamodb_state(st.client("dynamodb"), STATE_TABLE)


def empty(st: LocalStack, queue_url: str) -> None:
    """Delete every message visible on a queue (SQS allows a PurgeQueue only once a minute)."""
    sqs = st.client("sqs")
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )
