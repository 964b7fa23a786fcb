"""The notifications queue on SQS (standard): what the webhook's HTTP path accepted, queued before it
answers, checked by the same function from there (its SQS event source, ``template.yaml``).

A standard queue, not FIFO: notifications are hints in no order (every digest is re-resolved when it
is checked; the changes queue orders what follows), and a standard queue is delivered to many
invocations at once, which is the point. A delivery is one message (``SendMessage``) unless it is
over 64 KiB, the size SQS bills as one request: then it is split by events and queued with
``SendMessageBatch`` (up to 10 messages, 256 KiB in all, per call).
"""

from __future__ import annotations

import logging
from typing import Any

from tagpin.ports.webhooks import Notification

logger = logging.getLogger(__name__)

MESSAGE_LIMIT = 64 * 1024  # bytes: one billed request (SQS counts each 64 KiB chunk of a payload)
BATCH_LIMIT = 256 * 1024  # bytes per SendMessageBatch, all entries together
BATCH_ENTRIES = 10
ATTEMPTS = 3  # entries SQS reported failed are sent again, up to this many calls in all


class QueueFailed(RuntimeError):
    """Some notifications could not be queued (the sender is answered an error and retries)."""


def batches(bodies: list[str]) -> list[list[str]]:
    """``bodies`` in order, in batches of at most 10 entries and 256 KiB."""
    found: list[list[str]] = []
    size = 0
    for body in bodies:
        length = len(body.encode())
        if not found or len(found[-1]) == BATCH_ENTRIES or size + length > BATCH_LIMIT:
            found.append([])
            size = 0
        found[-1].append(body)
        size += length
    return found


class SqsNotificationQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self.url = queue_url

    def send(self, notifications: list[Notification]) -> None:
        bodies = [part.to_json() for n in notifications for part in n.split(MESSAGE_LIMIT)]
        if len(bodies) == 1:  # a registry's notification: one message, one request either way
            self._sqs.send_message(QueueUrl=self.url, MessageBody=bodies[0])
            return
        for batch in batches(bodies):
            self._send(batch)

    def _send(self, batch: list[str]) -> None:
        entries = {str(i): body for i, body in enumerate(batch)}
        for _attempt in range(ATTEMPTS):
            response = self._sqs.send_message_batch(
                QueueUrl=self.url, Entries=[{"Id": i, "MessageBody": b} for i, b in entries.items()]
            )
            failed = response.get("Failed", [])
            if not failed:
                return
            logger.warning(
                "notifications not queued, sending again",
                extra={"failed": len(failed), "codes": sorted({f.get("Code", "") for f in failed})},
            )
            entries = {f["Id"]: entries[f["Id"]] for f in failed if f["Id"] in entries}
        raise QueueFailed(f"{len(entries)} notifications could not be queued")
