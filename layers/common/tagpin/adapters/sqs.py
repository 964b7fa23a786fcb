"""The changes queue on SQS (FIFO), which carries changes (one message group per image,
deduplicated on the move of a tag) and delayed rollout verifications (a group each).

One queue, read by one function, instead of a second queue for verifications: Lambda's event
source polls every queue it reads around the clock (about 15 ``ReceiveMessage`` a minute when idle,
$0.33 a month per FIFO queue), and each queue needs a dead-letter queue and an alarm
(docs/cost.md). A FIFO queue has no per-message delay, so a verification carries when it is due
(``Verification.due_at``) and the consumer hides one that arrives early until then
(``SqsRedelivery.later``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from tagpin.domain.messages import Change, Verification
from tagpin.ports.queues import MAX_DELAY_S, DeadLetter


def group_id(image: str) -> str:
    """FIFO message group: one per followed tag, so the changes of one tag apply in order."""
    return image if len(image) <= 128 else hashlib.sha256(image.encode()).hexdigest()


def deduplication_id(
    image: str,
    digest: str,
    reconcile_run: str | None = None,
    round: str | None = None,
    changed_at: int | None = None,
) -> str:
    """The same move of a tag (image, digest, and when it moved there) sent twice within SQS's
    5-minute window is delivered once, whoever noticed it; a reconciler's healing change
    (``reconcile_run``) and a promotion's next wave or retry (``round``) are distinct from the
    change they follow, and so is a later return of the tag to the same digest (``changed_at``)."""
    key = f"{image}@{digest}"
    if changed_at is not None:
        key += f"@{changed_at}"
    if reconcile_run is not None:
        key += f"#{reconcile_run}"
    if round is not None:
        key += f"~{round}"
    return hashlib.sha256(key.encode()).hexdigest()


class SqsChangeQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def send(self, change: Change) -> None:
        move = change.move
        self._sqs.send_message(
            QueueUrl=self._url,
            MessageBody=change.model_dump_json(),
            MessageGroupId=group_id(move.image),
            MessageDeduplicationId=deduplication_id(
                move.image, move.digest, change.reconcile_run, change.round, move.changed_at
            ),
        )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SqsVerificationQueue:
    """Verifications on the changes queue, each due ``delay_s`` (up to ``MAX_DELAY_S``) after it is
    sent. Each is a message group of its own: it never waits behind a tag's changes or another
    verification, nor holds them up. The deduplication id is the body's hash, ``due_at`` included:
    the same verification sent twice at once is delivered once, a later identical one again."""

    def __init__(self, client: Any, queue_url: str, clock: Callable[[], int] = _now_ms) -> None:
        self._sqs = client
        self._url = queue_url
        self._clock = clock

    def send(self, verification: Verification, delay_s: int) -> None:
        delay_ms = max(0, min(MAX_DELAY_S, int(delay_s))) * 1000
        due = verification.model_copy(update={"due_at": self._clock() + delay_ms})
        key = hashlib.sha256(due.flat_json().encode()).hexdigest()
        self._sqs.send_message(
            QueueUrl=self._url,
            MessageBody=due.model_dump_json(exclude_none=True),
            MessageGroupId="verify-" + key[:64],
            MessageDeduplicationId=key,
        )


class SqsRedelivery:
    """Sets when failed records of the queue come back (``ChangeMessageVisibilityBatch``), and when
    a verification received before it is due is delivered again."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def later(self, delays: dict[str, int]) -> None:
        """``delays``: receipt handle -> seconds. Best effort: a record whose visibility cannot be
        changed comes back after the queue's own visibility timeout, as it would anyway."""
        entries = [
            {"Id": str(i), "ReceiptHandle": r, "VisibilityTimeout": d}
            for i, (r, d) in enumerate(delays.items())
        ]
        for start in range(0, len(entries), 10):
            self._sqs.change_message_visibility_batch(QueueUrl=self._url, Entries=entries[start : start + 10])


class SqsDeadLetters:
    """The dead-letter queue (FIFO) of the changes queue: read, sent back to ``queue_url``, deleted."""

    def __init__(self, client: Any, dead_letter_queue_url: str, queue_url: str) -> None:
        self._sqs = client
        self.url = dead_letter_queue_url
        self.queue_url = queue_url

    def count(self) -> int:
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes.get("ApproximateNumberOfMessages", 0))

    def receive(self, limit: int, hide_s: int, wait_s: int = 0) -> list[DeadLetter]:
        messages = self._sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=max(1, min(10, limit)),
            WaitTimeSeconds=wait_s,
            MessageSystemAttributeNames=["MessageGroupId"],
            VisibilityTimeout=hide_s,
        ).get("Messages", [])
        return [
            DeadLetter(
                message_id=m["MessageId"],
                body=m["Body"],
                group=m.get("Attributes", {}).get("MessageGroupId"),
                receipt=m["ReceiptHandle"],
            )
            for m in messages
        ]

    def send_back(self, letter: DeadLetter) -> None:
        self._sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=letter.body,
            MessageGroupId=letter.group or "redrive",
            MessageDeduplicationId=f"redrive-{letter.message_id}",
        )

    def delete(self, letter: DeadLetter) -> None:
        self._sqs.delete_message(QueueUrl=self.url, ReceiptHandle=letter.receipt)

    def release(self, letters: list[DeadLetter]) -> None:
        entries = [
            {"Id": str(i), "ReceiptHandle": letter.receipt, "VisibilityTimeout": 0}
            for i, letter in enumerate(letters)
        ]
        for start in range(0, len(entries), 10):
            self._sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=entries[start : start + 10])
