"""The checks queue (SQS standard, per-message ``DelaySeconds``): the follow-up work of a rollout.

A Lambda must not sleep while a Deployment rolls out, and the changes queue is FIFO (no
per-message delay), so every "look again later" is a message on this queue, consumed by the
``verifier`` function:

- ``verify``: is the patched target rolled out, still progressing (look again) or failed (roll back)?
- ``advance``: the active wave was verified; once its soak time has passed, promote the next wave.
- ``retry``: a rollout was deferred (maintenance window, concurrency limit); re-send the change.

Standard queues deliver at least once and out of order: every consumer of a check decides through
conditional writes in the state table, so a duplicate changes nothing.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

MAX_DELAY_S = 900  # SQS DelaySeconds maximum; longer waits re-check and delay again

CheckKind = Literal["verify", "advance", "retry"]


class Check(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: CheckKind
    image: str = Field(min_length=3, max_length=512)
    digest: str
    observed_at: int = Field(ge=0)
    target_id: str | None = None  # verify: the target
    applied_at: int | None = None  # verify: when the patch was made (epoch ms), for the timeout
    attempt: int = Field(default=0, ge=0)
    trigger: str | None = None
    correlation_id: str | None = Field(default=None, max_length=256)

    def again(self) -> Check:
        return self.model_copy(update={"attempt": self.attempt + 1})


class CheckQueue(Protocol):
    def send(self, check: Check, delay_s: int) -> None: ...


class SqsCheckQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def send(self, check: Check, delay_s: int) -> None:
        self._sqs.send_message(
            QueueUrl=self._url,
            MessageBody=check.model_dump_json(exclude_none=True),
            DelaySeconds=max(0, min(MAX_DELAY_S, int(delay_s))),
        )


class ListCheckQueue:
    """In-memory queue for tests: (check, delay) in the order sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[Check, int]] = []

    def send(self, check: Check, delay_s: int) -> None:
        self.sent.append((check, delay_s))
