"""In-memory queues: what was sent, in order."""

from __future__ import annotations

from typing import Any

from tagpin.domain.messages import Change, Verification
from tagpin.ports.queues import ChangeQueue, VerificationQueue
from tagpin.ports.webhooks import Notification, NotificationQueue


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


class Unreachable(Exception):
    """SQS did not take a message (a process that stops there: a Lambda timeout, a crash)."""


class FirstSendFails(ListVerificationQueue):
    """The verification queue whose first ``send`` raises ``Unreachable``; the rest are kept."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def send(self, verification: Verification, delay_s: int) -> None:
        if self.failures:
            self.failures -= 1
            raise Unreachable("SQS unreachable")
        super().send(verification, delay_s)


class ListNotificationQueue:
    """The webhook's notifications queue (``tagpin.ports.webhooks.NotificationQueue``): each
    notification as the SQS adapter would queue it (its JSON body), until ``take``n."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        self.failing: Exception | None = None  # raised by ``send`` while set (SQS unreachable)

    def send(self, notifications: list[Notification]) -> None:
        if self.failing is not None:
            raise self.failing
        self.bodies.extend(n.to_json() for n in notifications)

    def take(self) -> list[str]:
        taken, self.bodies = self.bodies, []
        return taken


_changes: ChangeQueue = ListQueue()
_notifications: NotificationQueue = ListNotificationQueue()
_verifications: VerificationQueue = ListVerificationQueue()


class RecordingSqs:
    """An SQS client that keeps what was sent (the queue adapters' ``send_message`` calls)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **message: Any) -> None:
        self.sent.append(message)
