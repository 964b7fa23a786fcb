"""The webhook's queued stage checks a batch of queued notifications with one lookup of what is
followed and one read of the followed tags' states, shared by its records, and still answers,
fails and retries each record alone (``WebhookService.batch``, ``tagpin.usecases.webhook_check``).

What is followed is read as the deployed webhook reads it (``Followed``: the configuration and the
state table's index, moto); the state's repositories count their calls (``PortCalls``); the
records of a batch are checked side by side, as the handler's batch processor checks them."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from tagpin.adapters.webhooks.sources import SOURCES
from tagpin.domain.budget import Budget, OutOfTime
from tagpin.domain.config import NotConfigured, Registry, TagpinConfig
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import Digest
from tagpin.ports.state import State
from tagpin.usecases.attestations import AttestationFilter
from tagpin.usecases.detect import Detector
from tagpin.usecases.webhook import CheckFailed, WebhookResult, WebhookService
from tagpin.usecases.webhook_check import Batch

from tests.support.constants import D1, STATE_TABLE, WEB, WEBHOOK_TOKEN
from tests.support.webhooks import Hook, PortCalls

DOCKER_WEB, GHCR_WEB = "docker.io/demo/web:stable", "ghcr.io/demo/web:stable"  # followed (Hook)
HEADERS = {"authorization": f"Bearer {WEBHOOK_TOKEN}"}


def unfollowed(name: str) -> str:
    return f"127.0.0.1:5000/team/{name}:stable"


@pytest.fixture
def calls() -> PortCalls:
    return PortCalls()


@pytest.fixture
def hook(store: State, dynamodb: Any, calls: PortCalls) -> Hook:
    return Hook(calls.wrap(store), dynamodb, STATE_TABLE, index=True)


def queued(hook: Hook, *deliveries: list[tuple[str, str]]) -> list[str]:
    """Each delivery (its events' images and delivery ids) answered 202 by the HTTP path; the
    messages it queued."""
    for events in deliveries:
        body = json.dumps([{"image": image, "id": delivery} for image, delivery in events]).encode()
        assert hook.post("generic", HEADERS, body).body == {"queued": len(events)}
    return hook.notifications.take()


def side_by_side(batch: Batch, bodies: list[str]) -> list[WebhookResult | BaseException]:
    """Every record of the batch checked at once (each on a thread of its own): its answer, or what
    it raised (the handler reports that record failed)."""
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        futures = [pool.submit(batch.check, body) for body in bodies]
    return [f.exception() or f.result() for f in futures]


def answers(outcomes: list[WebhookResult | BaseException]) -> list[tuple[int, int, int]]:
    """(accepted, ignored, duplicates) of each record answered."""
    found = []
    for outcome in outcomes:
        assert isinstance(outcome, WebhookResult), outcome
        assert outcome.status == 202, outcome
        found.append((outcome.body["accepted"], outcome.body["ignored"], outcome.body["duplicates"]))
    return found


THREE = (
    [(WEB, "d-1"), (unfollowed("a"), "d-1"), (unfollowed("b"), "d-1")],
    [(DOCKER_WEB, "d-2"), (unfollowed("c"), "d-2")],
    [(unfollowed("d"), "d-3"), (unfollowed("e"), "d-3"), (GHCR_WEB, "d-3")],
)


def test_a_batch_is_looked_up_once_and_its_states_read_once(hook: Hook, calls: PortCalls) -> None:
    bodies = queued(hook, *THREE)
    calls.names.clear()
    outcomes = side_by_side(hook.service.batch(bodies), bodies)
    assert answers(outcomes) == [(1, 2, 0), (1, 1, 0), (1, 2, 0)]
    # one lookup of the batch's 8 tags (one call of the index: a Query per shard they fall in),
    # one read of the 3 followed tags' targets; per followed tag its record, as before
    assert calls.count("index.") == 1, calls.names
    assert calls.count("targets.") == 1 and calls.count("tags.get") == 0, calls.names
    assert calls.count("tags.record") == 3
    assert sorted(c.move.image for c in hook.queue.sent) == sorted([WEB, DOCKER_WEB, GHCR_WEB])
    assert len(hook.resolver.calls) == 3  # one registry request per followed tag

    # The control: the same messages checked one at a time cost a lookup each (of a few tags: a
    # Query per tag, 8 in all) and a read of the targets each.
    calls.names.clear()
    for body in queued(hook, *([(image, f"again-{delivery}") for image, delivery in d] for d in THREE)):
        hook.service.check_queued(body)
    assert calls.count("index.") == 8 and calls.count("targets.") == 3, calls.names


def test_one_failing_record_is_reported_alone_and_comes_back(hook: Hook, calls: PortCalls) -> None:
    hook.resolver.answers[DOCKER_WEB] = [ConnectionError("registry down"), D1]  # down, then back
    bodies = queued(hook, *THREE)
    calls.names.clear()
    first, failed, third = side_by_side(hook.service.batch(bodies), bodies)
    assert isinstance(failed, CheckFailed), failed
    assert failed.result.body["events"][0]["outcome"] == "error"
    assert answers([first, third]) == [(1, 2, 0), (1, 2, 0)]
    assert calls.count("index.") == 1  # the failure did not cost the others a lookup of their own
    assert sorted(c.move.image for c in hook.queue.sent) == sorted([WEB, GHCR_WEB])
    # its claim was released: the message received again (alone, or in a batch of its own) is
    # checked, not counted a duplicate; the others' claims were kept
    assert answers(side_by_side(hook.service.batch([bodies[1]]), [bodies[1]])) == [(1, 1, 0)]
    assert answers(side_by_side(hook.service.batch([bodies[0]]), [bodies[0]])) == [(0, 2, 1)]
    assert DOCKER_WEB in {c.move.image for c in hook.queue.sent}


def test_malformed_records_get_their_400_and_the_others_are_checked(hook: Hook, calls: PortCalls) -> None:
    good = queued(hook, *THREE[:2])
    not_json = "not what the webhook queues"
    bad_digest = json.loads(good[0])
    bad_digest["events"][0]["digest"] = "sha256:nope"
    too_many = json.loads(good[1])
    too_many["events"] = too_many["events"] * 501  # 1,002 events: over the limit of a delivery
    malformed = [not_json, json.dumps(bad_digest), json.dumps(too_many)]
    bodies = [good[0], *malformed, good[1]]
    calls.names.clear()
    outcomes = side_by_side(hook.service.batch(bodies), bodies)
    refused = outcomes[1:4]
    assert [o.status for o in refused if isinstance(o, WebhookResult)] == [400, 400, 400], refused
    assert "not a queued notification" in refused[0].body["error"]  # type: ignore[union-attr]
    assert "digest" in refused[1].body["error"]  # type: ignore[union-attr]
    assert "limit is 1000" in refused[2].body["error"]  # type: ignore[union-attr]
    assert answers([outcomes[0], outcomes[4]]) == [(1, 2, 0), (1, 1, 0)]
    assert calls.count("index.") == 1 and len(hook.queue.sent) == 2


def test_a_delivery_queued_twice_in_one_batch_is_recorded_once(hook: Hook) -> None:
    (body,) = queued(hook, [(WEB, "d-9")])
    first, second = side_by_side(hook.service.batch([body, body]), [body, body])
    assert sorted(answers([first, second])) == [(0, 0, 1), (1, 0, 0)]
    assert len(hook.queue.sent) == 1


def test_a_failed_lookup_fails_each_record_that_needs_it_and_keeps_no_claim(
    hook: Hook, calls: PortCalls, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies = queued(hook, *THREE)
    index = hook.store.index

    def down(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("DynamoDB unavailable")

    monkeypatch.setattr(index, "entries", down)  # the index's reads fail
    outcomes = side_by_side(
        hook.service.batch([*bodies, "not a notification"]), [*bodies, "not a notification"]
    )
    assert [type(o) for o in outcomes[:3]] == [RuntimeError] * 3
    assert isinstance(outcomes[3], WebhookResult) and outcomes[3].status == 400
    monkeypatch.undo()
    # every claim begun before the lookup was released: the records come back and are checked
    assert answers(side_by_side(hook.service.batch(bodies), bodies)) == [(1, 2, 0), (1, 1, 0), (1, 2, 0)]


def test_the_configuration_gone_raises_for_the_record_to_come_back(hook: Hook) -> None:
    """Not the message's fault: raised (the handler reports the record failed, it comes back), not
    answered 400 and dropped as a malformed message is."""
    gone = False

    def config() -> TagpinConfig:
        if gone:
            raise NotConfigured("tagpin is not configured yet")
        return hook.config

    service = WebhookService(
        sources=SOURCES,
        secrets=lambda: hook.secrets,
        config=config,
        detector=lambda: hook.detector,
        notifications=lambda: hook.notifications,
        deliveries=lambda: hook.deliveries,
    )
    assert service.handle("generic", HEADERS, json.dumps({"image": WEB, "id": "d-5"}).encode()).status == 202
    bodies = [*hook.notifications.take(), "not a notification"]
    gone = True
    configured, malformed = side_by_side(service.batch(bodies), bodies)
    assert isinstance(configured, NotConfigured), configured
    assert isinstance(malformed, WebhookResult) and malformed.status == 400


def test_where_attestation_changes_are_ignored_the_tags_are_read_once_too(
    hook: Hook, calls: PortCalls
) -> None:
    """A registry that ignores attestation-only changes: a check compares the tag's stored digest
    with the registry's answer, so the batch reads the followed tags' items too, once for all."""
    ignoring = Registry(ignore_attestation_changes=True)
    hook.detector = Detector(
        hook.resolver,
        hook.store,
        hook.queue,
        confirm_delays=(),
        sleep=lambda _s: None,
        attestations=AttestationFilter(hook.resolver, lambda _host: ignoring),
    )
    for image in (WEB, DOCKER_WEB):  # recorded before, at the digest the registry still answers
        hook.store.tags.record(image, Digest(D1), 1, Trigger.POLL)
    bodies = queued(hook, *THREE)
    calls.names.clear()
    assert answers(side_by_side(hook.service.batch(bodies), bodies)) == [(1, 2, 0), (1, 1, 0), (1, 2, 0)]
    assert calls.names.count("tags.get_many") == 1 and calls.names.count("tags.get") == 0, calls.names
    assert calls.count("targets.") == 1


def test_a_registry_silent_past_the_invocations_time_fails_its_record_alone(hook: Hook) -> None:
    """Lambda stopping the function at its timeout would fail the whole batch and keep its claims
    (their retries counted duplicates): a registry that has not answered when only the reserve is
    left is that tag's error instead, its claim released, and the other records are answered."""
    answering = threading.Event()
    resolve = hook.resolver.resolve

    def silent_for_docker(ref: Any) -> Any:
        if ref.tagged == DOCKER_WEB:
            answering.wait(30)
        return resolve(ref)

    hook.resolver.resolve = silent_for_docker  # type: ignore[method-assign]
    bodies = queued(hook, *THREE)
    # 0.3 s left to wait for a registry in the silent one's check; the others' registries answer
    # when they answer (a time limit for them too would be a race with a busy machine's scheduler).
    silent_checks: set[int] = set()
    left = Budget(lambda: 1_300 if threading.get_ident() in silent_checks else 60_000, 1_000)
    batch = hook.service.batch(bodies, left)

    def check(body: str) -> WebhookResult:
        if body == bodies[1]:  # DOCKER_WEB's delivery
            silent_checks.add(threading.get_ident())
        return batch.check(body)

    try:
        with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
            futures = [pool.submit(check, body) for body in bodies]
        first, failed, third = [f.exception() or f.result() for f in futures]
    finally:
        answering.set()
    assert isinstance(failed, CheckFailed), failed
    assert "did not answer within the invocation's time" in failed.result.body["events"][0]["error"]
    assert answers([first, third]) == [(1, 2, 0), (1, 2, 0)]
    # its claim was released: received again, it is checked, not counted a duplicate
    assert answers(side_by_side(hook.service.batch([bodies[1]]), [bodies[1]])) == [(1, 1, 0)]
    assert DOCKER_WEB in {c.move.image for c in hook.queue.sent}


def test_a_record_is_not_started_when_only_the_reserve_is_left(hook: Hook) -> None:
    bodies = queued(hook, *THREE[:1])
    (outcome,) = side_by_side(hook.service.batch(bodies, Budget(lambda: 999, 1_000)), bodies)
    assert isinstance(outcome, OutOfTime), outcome
    assert hook.resolver.calls == [] and hook.queue.sent == []
    assert answers(side_by_side(hook.service.batch(bodies), bodies)) == [(1, 2, 0)]
