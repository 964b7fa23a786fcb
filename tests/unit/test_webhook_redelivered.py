"""One queued notification handed over twice by SQS (at-least-once): the second receive, made while
the first check still runs, checks it too instead of dropping it as a duplicate of its own claim, so
the first check failing afterwards (its registry unreachable) loses nothing; received again after a
check that succeeded, it records nothing new and its change is the same FIFO message (one roll).
Another message of the same delivery (the sender's retry) is still a duplicate. Over the DynamoDB
adapter (moto) and the in-memory delivery log."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from tagpin.adapters.sqs import deduplication_id
from tagpin.ports.state import State
from tagpin.usecases.webhook import CheckFailed, WebhookResult
from tagpin.usecases.webhook_keys import delivery_key

from tests.support.constants import D1, STATE_TABLE, WEB, WEBHOOK_TOKEN
from tests.support.deliveries import MemoryDeliveryLog
from tests.support.firsthold import HeldFirst
from tests.support.webhooks import Hook

HEADERS = {"authorization": f"Bearer {WEBHOOK_TOKEN}"}


@pytest.fixture(params=["dynamodb", "memory"])
def hook(request: pytest.FixtureRequest, store: State, dynamodb: Any) -> Hook:
    made = Hook(store, dynamodb, STATE_TABLE)
    if request.param == "memory":
        made.deliveries = MemoryDeliveryLog()  # type: ignore[assignment]
    return made


def queued(hook: Hook, delivery: str = "build-1") -> str:
    """A delivery posted (answered once queued): the body of the one message it queued."""
    assert hook.post("generic", HEADERS, json.dumps({"image": WEB, "id": delivery}).encode()).body == {
        "queued": 1
    }
    (body,) = hook.notifications.take()
    return body


def outcome(result: WebhookResult) -> str:
    (event,) = result.body["events"]
    return str(event["outcome"])


def test_a_message_received_again_while_its_first_check_runs_is_not_lost(
    hook: Hook, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = queued(hook)
    # the first receive's registry answers after the second receive, and is down
    held = HeldFirst(
        hook.deliveries.claim_delivery,
        hook.resolver.resolve,
        timeout_s=10,
        first_raises=ConnectionError("registry unreachable"),
    )
    monkeypatch.setattr(hook.deliveries, "claim_delivery", held.claim)
    monkeypatch.setattr(hook.resolver, "resolve", held.resolve)
    failed: list[BaseException] = []

    def first() -> None:
        try:
            hook.service.check_queued(body, "m-1")
        except BaseException as exc:  # the record is reported failed: it would come back
            failed.append(exc)

    running = threading.Thread(target=first)
    running.start()
    held.wait()  # the first check's claim is written and its registry asked (not answered yet)
    second = hook.service.check_queued(body, "m-1")  # SQS deletes the message once this succeeds
    held.release()
    running.join(10)
    assert outcome(second) == "changed" and second.body["duplicates"] == 0
    assert len(failed) == 1 and isinstance(failed[0], CheckFailed)
    # The notification's change was recorded and enqueued by the receive that succeeded.
    recorded = hook.store.tags.get(WEB)
    assert recorded is not None and recorded.digest == D1
    assert [c.move.digest for c in hook.queue.sent] == [D1]


def test_a_message_received_again_while_its_registry_is_down_comes_back(hook: Hook) -> None:
    """The first check holds the claim (its registry not answered yet) and the second receive's
    registry is down too: the second raises (the message is not deleted), it is not a duplicate."""
    body = queued(hook)
    now = int(hook.clock())  # the first check's claim, as it writes it
    assert hook.deliveries.claim_delivery(delivery_key("generic", "build-1", WEB), now, now + 60, "m-1")
    hook.resolver.default = ConnectionError("registry unreachable")
    with pytest.raises(CheckFailed):
        hook.service.check_queued(body, "m-1")
    assert hook.queue.sent == []


def test_a_message_received_again_after_its_check_rolls_once(hook: Hook) -> None:
    """The check succeeded (the change enqueued) and SQS hands the message over again before its
    deletion took: checked again, the tag's record is unchanged and the change sent again is the
    same FIFO message (same group, same deduplication id: SQS keeps one within 5 minutes); the
    consumer, later, finds its targets applied and sends nothing."""
    body = queued(hook)
    first = hook.service.check_queued(body, "m-1")
    recorded = hook.store.tags.get(WEB)
    again = hook.service.check_queued(body, "m-1")
    assert (outcome(first), outcome(again)) == ("changed", "unchanged")
    now = hook.store.tags.get(WEB)
    assert recorded is not None and now is not None  # observed again: the same move, no new one
    assert (now.digest, now.changed_at) == (recorded.digest, recorded.changed_at)
    assert len(hook.queue.sent) == 2
    one, other = (
        deduplication_id(c.move.image, c.move.digest, c.reconcile_run, c.round, c.move.changed_at)
        for c in hook.queue.sent
    )
    assert one == other


def test_another_message_of_the_same_delivery_is_still_a_duplicate(hook: Hook) -> None:
    """The sender delivered it twice (two HTTP requests, two queued messages): the second message
    is a duplicate, recorded and enqueued nothing; it is safe to drop, since the message that holds
    the claim stays queued until its own check succeeds."""
    first, retry = queued(hook), queued(hook)
    assert outcome(hook.service.check_queued(first, "m-1")) == "changed"
    assert outcome(hook.service.check_queued(retry, "m-2")) == "duplicate"
    assert len(hook.queue.sent) == 1


def test_a_message_whose_claim_could_not_be_released_is_checked_when_it_comes_back(
    hook: Hook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check failed (registry down) and so did the release of its claim (the table throttled):
    the claim stays for its TTL, but it is the message's own, so its next receive is checked."""
    body = queued(hook)

    def throttled(key: str, now: int) -> None:
        raise RuntimeError("DynamoDB throttled")

    monkeypatch.setattr(hook.deliveries, "release_delivery", throttled)
    hook.resolver.default = ConnectionError("registry unreachable")
    with pytest.raises(RuntimeError):  # the record fails: it comes back
        hook.service.check_queued(body, "m-1")
    monkeypatch.undo()
    hook.resolver.default = D1
    assert outcome(hook.service.check_queued(body, "m-1")) == "changed"
    assert [c.move.digest for c in hook.queue.sent] == [D1]
