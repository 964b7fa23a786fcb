"""A promotion's notice and its image history item land together: a process that dies between
claiming the notice (``notice_<once>`` on the ``ROLLOUT#`` item) and writing the item (a Lambda
timeout, a crash) leaves neither or both, so the redelivered step that finds the notice claimed
still finds the item in ``tagpin history`` (``tagpin.usecases.audit.Audit.record``;
``tagpin.adapters.dynamodb.promotions``: one TransactWriteItems; against moto's DynamoDB)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.ports.notify import RolloutEventKind
from tagpin.ports.state import ImageEvent, State
from tagpin.usecases.audit import Audit

from tests.support.constants import D0, D1
from tests.support.dying import Crash, Dying, Item
from tests.support.notify import RecordingNotifier
from tests.support.trail import start_promotion

IMAGE = "registry.example.com/team/web:stable"
NOW = 1_800_000_000_000
MOVE = Move(image=IMAGE, digest=D1, observed_at=NOW, trigger=Trigger.POLL, correlation_id="c-1")


def promoted(store: State, digest: str) -> None:
    start_promotion(store, IMAGE, digest, NOW, correlation_id="c-1")


def applied_events(store: State) -> list[str]:
    return [e.wave or "" for e in store.history.of_image(IMAGE) if e.event == ImageEvent.APPLIED.value]


def record(store: State, notifier: RecordingNotifier, once: str | None = "applied_0") -> bool:
    return Audit(store, notifier).record(
        MOVE,
        ImageEvent.APPLIED,
        NOW + 1_000,
        once=once,
        wave="canary",
        announce=RolloutEventKind.APPLIED,
        targets=["prod/shop/rollout/web/app"],
    )


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_step_that_dies_writing_its_image_event_leaves_it_once_redelivered(
    dynamodb: Any, state_table: str, when: str
) -> None:
    """The consumer dies at the write of the wave's 'applied' item (before DynamoDB has it, or
    after, its answer lost); SQS delivers the step again, to a fresh process: the image's trail
    says 'applied' exactly once. Dying before, nothing was written: the redelivery records and
    announces it. Dying after, both were written: the redelivery does neither (the announcement
    alone is lost, as Audit.record says)."""
    dying = Dying(dynamodb, writes_event(ImageEvent.APPLIED), when)
    first = dynamodb_state(dying, state_table)
    promoted(first, D1)
    with pytest.raises(Crash):
        record(first, RecordingNotifier())
    assert dying.crashed

    again = dynamodb_state(dynamodb, state_table)
    notifier = RecordingNotifier()
    assert record(again, notifier) is (when == "before")
    assert applied_events(again) == ["canary"]
    assert [e.event for e in notifier.sent] == ([RolloutEventKind.APPLIED] if when == "before" else [])
    assert not record(again, notifier)  # and a third delivery: nothing more
    assert applied_events(again) == ["canary"]


def test_a_notice_of_another_digest_writes_nothing(dynamodb: Any, state_table: str) -> None:
    """The promotion moved on to another digest: the claim fails, so the event is not recorded and
    not announced."""
    store = dynamodb_state(dynamodb, state_table)
    promoted(store, D0)
    notifier = RecordingNotifier()
    assert not record(store, notifier)
    assert applied_events(store) == []
    assert notifier.sent == []


def test_without_once_every_call_records_its_event(dynamodb: Any, state_table: str) -> None:
    """No notice to claim (no promotion at all): each call writes its history item and announces it."""
    store = dynamodb_state(dynamodb, state_table)
    notifier = RecordingNotifier()
    assert record(store, notifier, once=None)
    assert applied_events(store) == ["canary"]
    assert len(notifier.sent) == 1


def writes_event(event: ImageEvent) -> Callable[[Item], bool]:
    """An image history item of ``event``."""
    return lambda item: item.get("event", {}).get("S") == event.value
