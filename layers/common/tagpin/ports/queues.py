"""What the use cases send, as they see it: changes to apply (per image in order) and the delayed
follow-up work of a rollout (verifications, each after a delay). Both travel on the one changes
queue (``tagpin.adapters.sqs``); what failed for good waits in its dead-letter queue (``DeadLetters``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tagpin.domain.messages import Change, Verification

# The longest one verification waits before it is handled; longer waits (a soak time) come back and
# wait again. 15 minutes keeps a waiting verification well within SQS's 12-hour visibility limit.
MAX_DELAY_S = 900


class ChangeQueue(Protocol):
    def send(self, change: Change) -> None: ...


class VerificationQueue(Protocol):
    def send(self, verification: Verification, delay_s: int) -> None: ...


@dataclass(frozen=True)
class DeadLetter:
    """A message of the dead-letter queue, received (``receipt`` hides it until released or
    deleted)."""

    message_id: str
    body: str
    group: str | None
    receipt: str


class DeadLetters(Protocol):
    """The dead-letter queue of the changes queue, and the way back to it."""

    def count(self) -> int:
        """About how many messages it holds (SQS's approximate count, visible ones)."""
        ...

    def receive(self, limit: int, hide_s: int, wait_s: int = 0) -> list[DeadLetter]:
        """Up to ``limit`` (at most 10) messages, hidden from other readers for ``hide_s``."""
        ...

    def send_back(self, letter: DeadLetter) -> None:
        """Send a change or verification to the changes queue again (same group and body)."""
        ...

    def delete(self, letter: DeadLetter) -> None: ...

    def release(self, letters: list[DeadLetter]) -> None:
        """Make received messages visible again at once (a look that changes nothing)."""
        ...
