"""What the use cases send, as they see it: changes to apply (per image in order) and the delayed
follow-up work of a rollout (verifications, each after a delay). Both travel on the one changes
queue (``tagpin.adapters.sqs``)."""

from __future__ import annotations

from typing import Protocol

from tagpin.domain.messages import Change, Verification

# The longest one verification waits before it is handled; longer waits (a soak time) come back and
# wait again. 15 minutes keeps a waiting verification well within SQS's 12-hour visibility limit.
MAX_DELAY_S = 900


class ChangeQueue(Protocol):
    def send(self, change: Change) -> None: ...


class VerificationQueue(Protocol):
    def send(self, verification: Verification, delay_s: int) -> None: ...
