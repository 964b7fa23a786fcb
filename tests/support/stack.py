"""Helpers over the local stack (``tagpin_local.stack.LocalStack``) for the integration and e2e tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.ports.state import State, TargetStatus
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


def wait_for(what: str, condition: Callable[[], Any], deadline_s: float = 45.0) -> Any:
    """Poll ``condition`` every 0.1 s; its first truthy value, or an AssertionError naming ``what``."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {deadline_s:.0f} s: {what}")


def target_status(st: LocalStack, target_id: str, digest: str) -> TargetStatus | None:
    """The target's status if it is at ``digest``, else None."""
    target = state_of(st).targets.get(target_id)
    return target.status if target is not None and target.digest == digest else None
