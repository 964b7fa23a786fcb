"""In-memory queues: what was sent, in order."""

from __future__ import annotations

from typing import Any

from tagpin.domain.messages import Change, Verification
from tagpin.ports.queues import ChangeQueue, VerificationQueue


class ListQueue:
    """The changes queue (``tagpin.ports.queues.ChangeQueue``)."""

    def __init__(self) -> None:
        self.sent: list[Change] = []

    def send(self, change: Change) -> None:
        self.sent.append(change)


class ListVerificationQueue:
    """The verification queue (``tagpin.ports.queues.VerificationQueue``): (verification, delay)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Verification, int]] = []

    def send(self, verification: Verification, delay_s: int) -> None:
        self.sent.append((verification, delay_s))


_changes: ChangeQueue = ListQueue()
_verifications: VerificationQueue = ListVerificationQueue()


class RecordingSqs:
    """An SQS client that keeps what was sent (the queue adapters' ``send_message`` calls)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **message: Any) -> None:
        self.sent.append(message)
