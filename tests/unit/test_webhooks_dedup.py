"""Delivery-id deduplication: a replayed delivery is a duplicate; a failed check releases its
claim so the sender's retry is heard; claims expire; ids are per source and per tag."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from tagpin.adapters.dynamodb.deliveries import DeliveryStore
from tagpin.ports.state import State
from tagpin.usecases.webhook import DELIVERY_TTL_S, CheckFailed
from tagpin.usecases.webhook_check import Checker

from tests.support.constants import D1, STATE_TABLE, WEB, WEBHOOK_TOKEN
from tests.support.webhooks import Hook, sample


@pytest.fixture
def hook(store: State, dynamodb: Any) -> Hook:
    return Hook(store, dynamodb, STATE_TABLE)


def generic(image: str = WEB, delivery: str | None = "build-1") -> bytes:
    return json.dumps({"image": image, **({"id": delivery} if delivery else {})}).encode()


def post(hook: Hook, body: bytes) -> Any:
    """``body`` delivered: answered once queued, then the queued stage's result (where the claim is)."""
    return hook.delivered("generic", {"authorization": f"Bearer {WEBHOOK_TOKEN}"}, body).body


def test_same_delivery_id_is_a_duplicate(hook: Hook) -> None:
    assert post(hook, generic())["accepted"] == 1
    recorded = hook.store.tags.get(WEB)
    again = post(hook, generic())
    assert (again["accepted"], again["duplicates"]) == (0, 1)
    assert again["events"] == [
        {
            "image": "127.0.0.1:5000/demo/web:stable",
            "outcome": "duplicate",
            "enqueued": False,
            "behind": 0,
            "delivery_id": "build-1",
        }
    ]
    # Nothing of the duplicate is recorded or enqueued. Its registry request was made beside its
    # claim (one round trip less per notification), and its answer dropped.
    assert len(hook.queue.sent) == 1 and hook.store.tags.get(WEB) == recorded
    assert len(hook.resolver.calls) == 2


def test_a_delivery_queued_twice_is_recorded_once(hook: Hook) -> None:
    """The sender's retry arrives before the first is checked: both are queued (two 202s), the
    queued stage claims the delivery once; the other is a duplicate, neither recorded nor enqueued."""
    headers = {"authorization": f"Bearer {WEBHOOK_TOKEN}"}
    for _ in range(2):
        assert hook.post("generic", headers, generic()).body == {"queued": 1}
    assert hook.queue.sent == [] and hook.store.tags.get(WEB) is None  # nothing checked yet
    checked = hook.checked().body
    assert (checked["accepted"], checked["duplicates"]) == (1, 1)
    assert len(hook.queue.sent) == 1


def test_a_delivery_that_fails_midway_releases_every_claim(
    hook: Hook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claims of configured tags start before the lookup of what is followed: when the lookup
    (or any step before a tag's check) fails, none of them is left claimed, so the sender's retry
    checks every tag of the delivery."""
    body = json.dumps(
        [{"image": WEB, "id": "d-1"}, {"image": "docker.io/demo/web:stable", "id": "d-1"}]
    ).encode()

    def down(_checker: Checker, _images: Any) -> Any:
        raise RuntimeError("DynamoDB unavailable")

    monkeypatch.setattr(Checker, "lookup", down)
    with pytest.raises(RuntimeError):
        post(hook, body)
    monkeypatch.undo()
    retried = post(hook, body)
    assert (retried["accepted"], retried["duplicates"]) == (2, 0)
    assert len(hook.queue.sent) == 2


def test_another_delivery_id_is_checked_again(hook: Hook) -> None:
    post(hook, generic(delivery="build-1"))
    assert post(hook, generic(delivery="build-2"))["events"][0]["outcome"] == "unchanged"


def test_ids_are_per_source(hook: Hook) -> None:
    post(hook, generic(delivery="c0d58c2e-2f43-4f5a-8bb0-2f0b1d7b6d01"))
    _, event, _ = sample("distribution-v2")  # carries that event id too
    assert hook.deliver(event).body["duplicates"] == 0


def test_a_failed_check_releases_the_claim(hook: Hook) -> None:
    hook.resolver.default = ConnectionError("registry down")
    with pytest.raises(CheckFailed) as failing:  # the queued message comes back
        post(hook, generic())
    failed = failing.value.result.body
    assert failed["events"][0]["outcome"] == "error" and hook.queue.sent == []
    hook.resolver.default = D1
    retried = post(hook, generic())
    assert retried["accepted"] == 1 and retried["duplicates"] == 0
    assert len(hook.queue.sent) == 1
    assert post(hook, generic())["duplicates"] == 1


def test_claims_expire(hook: Hook) -> None:
    post(hook, generic())
    hook.clock.advance(DELIVERY_TTL_S + 1)
    assert post(hook, generic())["duplicates"] == 0


def test_unfollowed_images_claim_nothing(hook: Hook, dynamodb: Any) -> None:
    post(hook, generic(image="127.0.0.1:5000/demo/other:stable"))
    items = dynamodb.scan(TableName=STATE_TABLE)["Items"]
    assert not [i for i in items if i["pk"]["S"].startswith("DELIVERY#")]


def test_store_claim_and_release(dynamodb: Any, state_table: str) -> None:
    log = DeliveryStore(dynamodb, state_table)
    assert log.claim_delivery("k", now=100, expires_at=200)
    assert not log.claim_delivery("k", now=150, expires_at=250)
    assert log.claim_delivery("k", now=201, expires_at=300)  # expired (TTL deletes lazily)
    log.release_delivery("k", now=202)
    (item,) = [i for i in dynamodb.scan(TableName=state_table)["Items"] if i["pk"]["S"] == "DELIVERY#k"]
    assert (
        0 < int(item["expires_at"]["N"]) < 202
    )  # expired now: TTL deletes it (it ignores times 5 years past)
    assert log.claim_delivery("k", now=202, expires_at=400)
    (item,) = [i for i in dynamodb.scan(TableName=state_table)["Items"] if i["pk"]["S"] == "DELIVERY#k"]
    assert item["expires_at"] == {"N": "400"}


def test_a_check_that_raises_releases_the_claim(hook: Hook, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own store or queue failing (the queued record fails): its next receive is checked."""

    def refuse(change: Any) -> None:
        raise RuntimeError("SQS unavailable")

    monkeypatch.setattr(hook.queue, "send", refuse)
    with pytest.raises(RuntimeError):
        post(hook, generic())
    monkeypatch.undo()
    retried = post(hook, generic())
    assert retried["duplicates"] == 0 and retried["events"][0]["outcome"] != "duplicate"
    assert len(hook.queue.sent) == 1


def test_the_claim_and_the_registry_request_are_made_side_by_side(
    hook: Hook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry delivers its notifications one at a time: a check's round trips that do not
    need each other are made at once. Here the claim only completes once the registry has been
    asked; made one after the other, it would wait out its 10 s and the delivery fail."""
    asked = threading.Event()
    claim, resolve = hook.deliveries.claim_delivery, hook.resolver.resolve

    def claim_once_asked(key: str, now: int, expires_at: int, message: str | None = None) -> bool:
        if not asked.wait(10):
            raise TimeoutError("the registry was not asked while the claim was on its way")
        return claim(key, now, expires_at, message)

    def resolving(ref: Any) -> Any:
        asked.set()
        return resolve(ref)

    monkeypatch.setattr(hook.deliveries, "claim_delivery", claim_once_asked)
    monkeypatch.setattr(hook.resolver, "resolve", resolving)
    assert post(hook, generic())["accepted"] == 1
    assert len(hook.queue.sent) == 1
