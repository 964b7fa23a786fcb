"""The state repositories against moto's DynamoDB: conditional writes decide; history records each outcome."""

from __future__ import annotations

import threading

import pytest
from botocore.exceptions import ClientError
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.adapters.dynamodb.hints import GRACE_MS
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import TagOutcome
from tagpin.ports.state import State, TagRecord, TargetStatus

from tests.support.constants import D1, D2, D3, NGINX_LATEST
from tests.support.trail import start_promotion

TARGET = "dev/default/Deployment/web/nginx"


# -- followed tags ----------------------------------------------------------------------------------


def batch_get_keys(dynamodb) -> list[int]:
    """The number of keys each BatchGetItem the client makes from now on asks for."""
    keys: list[int] = []
    real = dynamodb.batch_get_item

    def counting(**kwargs):
        keys.append(sum(len(v["Keys"]) for v in kwargs["RequestItems"].values()))
        return real(**kwargs)

    dynamodb.batch_get_item = counting
    return keys


def test_first_sighting_is_changed_without_previous(store: State) -> None:
    record = store.tags.record(NGINX_LATEST, D1, 100, "poll")
    assert record.result is TagOutcome.CHANGED
    assert record.previous_digest is None
    assert record.current.digest == D1
    assert record.current.observed_at == 100
    stored = store.tags.get(NGINX_LATEST)
    assert stored is not None
    assert (stored.digest, stored.observed_at, stored.changed_at, stored.resolved_at) == (D1, 100, 100, 100)
    assert stored.last_error is None


def test_get_tag_unknown_is_none(store: State) -> None:
    assert store.tags.get("docker.io/library/redis:7") is None


def test_same_digest_later_is_unchanged_and_moves_resolved_at(store: State) -> None:
    store.tags.record(NGINX_LATEST, D1, 100, "poll")
    record = store.tags.record(NGINX_LATEST, D1, 200, "webhook")
    assert record.result is TagOutcome.UNCHANGED
    assert record.previous_digest == D1
    assert record.current.digest == D1
    assert record.current.observed_at == 200
    assert record.current.resolved_at == 200
    assert record.current.changed_at == 100  # the digest did not change at 200
    stored = store.tags.get(NGINX_LATEST)
    assert stored is not None
    assert (stored.observed_at, stored.changed_at, stored.resolved_at) == (200, 100, 200)


def test_new_digest_later_is_changed_with_previous(store: State) -> None:
    store.tags.record(NGINX_LATEST, D1, 100, "poll")
    record = store.tags.record(NGINX_LATEST, D2, 200, "poll")
    assert record.result is TagOutcome.CHANGED
    assert record.previous_digest == D1
    assert record.current.digest == D2
    stored = store.tags.get(NGINX_LATEST)
    assert stored is not None
    assert (stored.digest, stored.observed_at, stored.changed_at) == (D2, 200, 200)


def test_older_observation_with_another_digest_is_stale(store: State) -> None:
    store.tags.record(NGINX_LATEST, D2, 200, "poll")
    record = store.tags.record(NGINX_LATEST, D1, 150, "webhook")
    assert record.result is TagOutcome.STALE
    assert record.current.digest == D2  # the stored, newer state
    assert record.current.observed_at == 200
    stored = store.tags.get(NGINX_LATEST)
    assert stored is not None
    assert (stored.digest, stored.observed_at) == (D2, 200)


def test_older_observation_with_the_same_digest_is_unchanged_and_keeps_observed_at(store: State) -> None:
    store.tags.record(NGINX_LATEST, D1, 200, "poll")
    record = store.tags.record(NGINX_LATEST, D1, 150, "poll")
    assert record.result is TagOutcome.UNCHANGED
    stored = store.tags.get(NGINX_LATEST)
    assert stored is not None
    assert stored.observed_at == 200  # never moves backwards


def test_equal_observed_at_with_another_digest_is_stale(store: State) -> None:
    store.tags.record(NGINX_LATEST, D1, 100, "poll")
    assert store.tags.record(NGINX_LATEST, D2, 100, "poll").result is TagOutcome.STALE
    stored = store.tags.get(NGINX_LATEST)
    assert stored is not None
    assert stored.digest == D1


def test_tags_are_independent(store: State) -> None:
    store.tags.record(NGINX_LATEST, D1, 100, "poll")
    other = "docker.io/library/nginx:1.27"
    assert store.tags.record(other, D2, 50, "poll").result is TagOutcome.CHANGED
    assert store.tags.get(NGINX_LATEST).digest == D1  # type: ignore[union-attr]


@pytest.mark.parametrize("threads", [8])
def test_concurrent_identical_observations_change_exactly_once(store: State, threads: int) -> None:
    store.tags.record(NGINX_LATEST, D1, 100, "poll")
    barrier = threading.Barrier(threads)
    results: dict[int, TagOutcome] = {}
    errors: list[BaseException] = []

    def observe(at: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[at] = store.tags.record(NGINX_LATEST, D2, at, "webhook").result
        except BaseException as exc:
            errors.append(exc)

    times = [1000 + i for i in range(threads)]
    workers = [threading.Thread(target=observe, args=(at,)) for at in times]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert not errors
    assert len(results) == threads
    outcomes = list(results.values())
    assert outcomes.count(TagOutcome.CHANGED) == 1
    assert outcomes.count(TagOutcome.UNCHANGED) == threads - 1
    stored = store.tags.get(NGINX_LATEST)
    assert stored is not None
    assert stored.digest == D2
    assert stored.observed_at == max(times)  # the newest observation wins the "last seen" mark


def test_concurrent_first_sightings_change_exactly_once(store: State) -> None:
    threads = 8
    barrier = threading.Barrier(threads)
    results: list[TagRecord] = []
    lock = threading.Lock()

    def observe(at: int) -> None:
        barrier.wait(timeout=10)
        record = store.tags.record(NGINX_LATEST, D3, at, "poll")
        with lock:
            results.append(record)

    workers = [threading.Thread(target=observe, args=(500 + i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert len(results) == threads
    changed = [r for r in results if r.result is TagOutcome.CHANGED]
    assert len(changed) == 1
    assert changed[0].previous_digest is None


def test_record_tag_error_keeps_the_digest(store: State) -> None:
    store.tags.record(NGINX_LATEST, D1, 100, "poll")
    store.tags.record_error(NGINX_LATEST, "RegistryError: 503 Service Unavailable", 150)
    stored = store.tags.get(NGINX_LATEST)
    assert stored is not None
    assert stored.digest == D1
    assert stored.observed_at == 100
    assert stored.last_error == "RegistryError: 503 Service Unavailable"
    assert stored.error_at == 150
    # A later successful check clears the error.
    assert store.tags.record(NGINX_LATEST, D1, 200, "poll").result is TagOutcome.UNCHANGED
    cleared = store.tags.get(NGINX_LATEST)
    assert cleared is not None
    assert cleared.last_error is None
    assert cleared.error_at is None


def test_record_tag_error_truncates_long_messages(store: State) -> None:
    store.tags.record(NGINX_LATEST, D1, 100, "poll")
    store.tags.record_error(NGINX_LATEST, "x" * 5000, 150)
    assert len(store.tags.get(NGINX_LATEST).last_error or "") == 1000  # type: ignore[union-attr]


def test_first_sighting_after_an_error_is_changed(store: State) -> None:
    """The very first resolution failed (registry down): the error creates the item without a
    digest. The first successful resolution must still count as a change."""
    store.tags.record_error(NGINX_LATEST, "ConnectError: refused", 50)
    record = store.tags.record(NGINX_LATEST, D1, 100, "poll")
    assert record.result is TagOutcome.CHANGED
    assert record.previous_digest is None
    stored = store.tags.get(NGINX_LATEST)
    assert stored is not None
    assert (stored.digest, stored.observed_at, stored.last_error) == (D1, 100, None)


# -- targets ----------------------------------------------------------------------------------------


def test_claim_first_time(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, "poll", now=110)
    target = store.targets.get(TARGET)
    assert target is not None
    assert (target.target_id, target.image, target.digest, target.observed_at) == (
        TARGET,
        NGINX_LATEST,
        D1,
        100,
    )
    assert target.status is TargetStatus.PENDING
    assert target.updated_at == 110
    assert target.trigger == "poll"


def test_claim_refuses_an_older_observation(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D2, 200, "poll", now=210)
    assert not store.targets.claim(TARGET, NGINX_LATEST, D1, 100, "poll", now=220)
    target = store.targets.get(TARGET)
    assert target is not None
    assert (target.digest, target.observed_at, target.updated_at) == (D2, 200, 210)


def test_claim_accepts_a_retry_of_the_same_observation(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, "webhook", now=110)
    store.targets.finish(TARGET, D1, TargetStatus.FAILED, 120, trigger="webhook", detail="Unreachable: x")
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, "webhook", now=130)
    target = store.targets.get(TARGET)
    assert target is not None
    assert target.status is TargetStatus.PENDING
    assert target.detail is None  # the failure detail is cleared on re-claim
    assert target.updated_at == 130


def test_claim_refuses_the_same_time_with_another_digest(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, "poll", now=110)
    assert not store.targets.claim(TARGET, NGINX_LATEST, D2, 100, "poll", now=120)
    assert store.targets.get(TARGET).digest == D1  # type: ignore[union-attr]


def test_claim_accepts_a_newer_observation(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, "poll", now=110)
    store.targets.finish(TARGET, D1, TargetStatus.APPLIED, 120, trigger="poll")
    assert store.targets.claim(TARGET, NGINX_LATEST, D2, 200, "poll", now=210)
    target = store.targets.get(TARGET)
    assert target is not None
    assert (target.digest, target.status) == (D2, TargetStatus.PENDING)


def test_finish_updates_while_the_digest_is_held(store: State) -> None:
    store.targets.claim(TARGET, NGINX_LATEST, D1, 100, "poll", now=110)
    held = store.targets.finish(
        TARGET,
        D1,
        TargetStatus.APPLIED,
        120,
        trigger="poll",
        detail="patched",
        previous_image="nginx:1.26",
        correlation_id="corr-1",
    )
    assert held is True
    target = store.targets.get(TARGET)
    assert target is not None
    assert (target.status, target.updated_at, target.detail, target.previous_image) == (
        TargetStatus.APPLIED,
        120,
        "patched",
        "nginx:1.26",
    )
    (entry,) = store.history.of_target(TARGET)
    assert entry.digest == D1
    assert entry.status == "applied"
    assert entry.at == 120
    assert entry.trigger == "poll"
    assert entry.detail == "patched"
    assert entry.previous_image == "nginx:1.26"
    assert entry.correlation_id == "corr-1"


def test_finish_does_not_overwrite_a_newer_claim_but_records_history(store: State) -> None:
    store.targets.claim(TARGET, NGINX_LATEST, D1, 100, "poll", now=110)
    store.targets.claim(TARGET, NGINX_LATEST, D2, 200, "poll", now=210)  # a newer change took over
    held = store.targets.finish(TARGET, D1, TargetStatus.APPLIED, 220, trigger="poll", detail="patched")
    assert held is False
    target = store.targets.get(TARGET)
    assert target is not None
    assert (target.digest, target.status, target.updated_at, target.detail) == (
        D2,
        TargetStatus.PENDING,
        210,
        None,
    )
    (entry,) = store.history.of_target(TARGET)
    assert entry.digest == D1
    assert entry.status == "superseded"


def test_finish_on_an_unknown_target_does_not_create_it(store: State) -> None:
    assert store.targets.finish(TARGET, D1, TargetStatus.APPLIED, 100, trigger="poll") is False
    assert store.targets.get(TARGET) is None
    assert [e.status for e in store.history.of_target(TARGET)] == ["superseded"]


def test_history_is_newest_first_and_limited(store: State) -> None:
    store.targets.claim(TARGET, NGINX_LATEST, D1, 100, "poll", now=100)
    store.targets.finish(TARGET, D1, TargetStatus.FAILED, 1_000, trigger="poll", detail="Unreachable")
    store.targets.finish(TARGET, D1, TargetStatus.APPLIED, 3_000, trigger="poll")
    store.targets.claim(TARGET, NGINX_LATEST, D2, 200, "webhook", now=9_000)
    store.targets.finish(TARGET, D2, TargetStatus.GONE, 10_000, trigger="webhook", detail="NotFound")
    history = store.history.of_target(TARGET)
    assert [(e.at, e.digest, e.status) for e in history] == [
        (10000, D2, "gone"),
        (3000, D1, "applied"),
        (1000, D1, "failed"),
    ]  # the target's own STATE item is not part of the history
    assert [e.at for e in store.history.of_target(TARGET, limit=2)] == [10000, 3000]
    assert store.history.of_target("dev/default/Deployment/other/nginx") == []


def test_get_targets_pages_beyond_one_hundred(store: State, dynamodb, state_table: str) -> None:
    calls = batch_get_keys(dynamodb)
    ids = [f"dev/ns/Deployment/app-{i}/c" for i in range(250)]
    items = [
        {
            "PutRequest": {
                "Item": {
                    "pk": {"S": "TARGET#" + target_id},
                    "sk": {"S": "STATE"},
                    "image": {"S": NGINX_LATEST},
                    "digest": {"S": D1},
                    "observed_at": {"N": str(100 + i)},
                    "status": {"S": "applied"},
                    "updated_at": {"N": "1"},
                }
            }
        }
        for i, target_id in enumerate(ids)
        if i % 5 != 0  # some targets were never claimed
    ]
    for start in range(0, len(items), 25):
        dynamodb.batch_write_item(RequestItems={state_table: items[start : start + 25]})
    found = store.targets.get_many([*ids, ids[1], ids[2]])  # duplicates are asked once
    assert set(found) == {t for i, t in enumerate(ids) if i % 5 != 0}
    assert found[ids[7]].observed_at == 107
    assert found[ids[7]].status is TargetStatus.APPLIED
    assert calls == [100, 100, 50]
    assert all(n <= 100 for n in calls)


def _hint(dynamodb, table: str, partition: str, key: str) -> dict:
    return dynamodb.get_item(TableName=table, Key={"pk": {"S": partition}, "sk": {"S": key}})["Item"]


def test_holds_are_listed_from_their_hints_without_reading_every_target(
    store: State, dynamodb, state_table: str
) -> None:
    others = [f"dev/ns/Deployment/app-{i:02d}/c" for i in range(30)]
    for i, target_id in enumerate(others):
        store.targets.claim(target_id, NGINX_LATEST, D1, 100 + i, "poll", now=100)
    held = [others[3], others[17]]
    assert store.targets.hold(held[0], "", 1_000, reason="a person", trigger=Trigger.MANUAL)
    assert store.targets.hold(held[1], D1, 1_000, reason="changed outside tagpin", trigger=Trigger.RECONCILE)
    keys = batch_get_keys(dynamodb)
    assert [t.target_id for t in store.targets.held(100, 2_000)] == sorted(held)
    assert keys == [2]  # the held targets' states only, not the 30
    # released: no longer listed; its hint is retired by a read once past the grace period
    assert store.targets.release(held[0], 3_000, reason="a person", trigger=Trigger.MANUAL)
    assert [t.target_id for t in store.targets.held(100, 3_000)] == [held[1]]
    assert "expires_at" not in _hint(dynamodb, state_table, "HOLDS", held[0])
    later = 1_000 + GRACE_MS + 1
    assert [t.target_id for t in store.targets.held(100, later)] == [held[1]]
    assert _hint(dynamodb, state_table, "HOLDS", held[0])["expires_at"]["N"] == str(later // 1000)
    # held again: listed again, the hint live again
    assert store.targets.hold(held[0], "", later + 1, reason="again", trigger=Trigger.MANUAL)
    assert [t.target_id for t in store.targets.held(100, later + 2)] == sorted(held)
    assert "expires_at" not in _hint(dynamodb, state_table, "HOLDS", held[0])
    # moved on without a release (a newer digest claimed it): left out
    assert store.targets.claim(held[1], NGINX_LATEST, D2, 5_000, "poll", now=later + 3)
    assert [t.target_id for t in store.targets.held(100, later + 4)] == [held[0]]
    # a hold that has ended is over, though its state still says held until the next reconcile
    assert store.targets.hold(
        others[20], "", later, reason="for an hour", trigger=Trigger.MANUAL, until=later + 10
    )
    assert others[20] in [t.target_id for t in store.targets.held(100, later + 5)]
    assert others[20] not in [t.target_id for t in store.targets.held(100, later + 10)]
    # a workload's hold annotation (recorded by the consumer's finish) is listed as every hold
    store.targets.claim(others[25], NGINX_LATEST, D2, 6_000, "poll", now=later)
    store.targets.finish(others[25], D2, TargetStatus.HELD, later, trigger="poll", detail="annotated")
    assert others[25] in [t.target_id for t in store.targets.held(100, later + 5)]


def test_a_hint_ahead_of_its_state_or_written_again_is_never_retired(
    store: State, dynamodb, state_table: str
) -> None:
    from tagpin.adapters.dynamodb.hints import Hints
    from tagpin.adapters.dynamodb.table import Table

    hints = Hints(Table(dynamodb, state_table), "HOLDS")
    hints.note("dev/ns/Deployment/web/c", 1_000)  # the hold's own write is on its way
    assert store.targets.held(100, 1_000 + GRACE_MS - 1) == []
    assert "expires_at" not in _hint(dynamodb, state_table, "HOLDS", "dev/ns/Deployment/web/c")
    seen = hints.read(100)  # a reader past the grace period...
    hints.note("dev/ns/Deployment/web/c", 1_000 + GRACE_MS + 5)  # ...while a new hold writes it again
    hints.prune(seen, set(), 1_000 + GRACE_MS + 10)
    assert "expires_at" not in _hint(dynamodb, state_table, "HOLDS", "dev/ns/Deployment/web/c")


def test_retired_hints_do_not_crowd_out_live_ones(store: State) -> None:
    gone = [f"dev/ns/Deployment/a{i}/c" for i in range(5)]
    for target_id in gone:
        store.targets.hold(target_id, "", 1_000, reason="x", trigger=Trigger.MANUAL)
        store.targets.release(target_id, 2_000, reason="x", trigger=Trigger.MANUAL)
    store.targets.hold("dev/ns/Deployment/z/c", "", 1_000, reason="x", trigger=Trigger.MANUAL)
    assert store.targets.held(5, 1_000 + GRACE_MS + 1) == []  # the five released read first, retired
    assert [t.target_id for t in store.targets.held(5, 1_000 + GRACE_MS + 2)] == ["dev/ns/Deployment/z/c"]


def test_approvals_waiting_are_listed_from_their_hints(store: State, dynamodb, state_table: str) -> None:
    images = [f"registry.example.com/team/app{i:02d}:stable" for i in range(20)]
    for image in images:
        start_promotion(store, image, D1, 100)
    waiting = [images[4], images[11]]
    for image in waiting:
        assert store.promotions.request_approval(image, D1, 0, 1_000, expires_at=90_000)
    assert [p.image for p in store.promotions.awaiting(100, 2_000)] == sorted(waiting)
    # approved: no longer listed
    assert store.promotions.decide_approval(waiting[0], D1, 0, True, 3_000, "approved by ops")
    assert [p.image for p in store.promotions.awaiting(100, 3_000)] == [waiting[1]]
    # superseded by a newer digest's promotion: left out, and both hints retired once past the grace
    start_promotion(store, waiting[1], D2, 4_000, observed_at=200)
    later = 1_000 + GRACE_MS + 1
    assert store.promotions.awaiting(100, later) == []
    assert _hint(dynamodb, state_table, "AWAITING", waiting[0])["expires_at"]["N"] == str(later // 1000)
    assert _hint(dynamodb, state_table, "AWAITING", waiting[1])["expires_at"]["N"] == str(later // 1000)
    # the newer digest asks again: listed again, its hint live again
    assert store.promotions.request_approval(waiting[1], D2, 0, later + 1, expires_at=later + 90_000)
    (again,) = store.promotions.awaiting(100, later + 2)
    assert again.image == waiting[1] and again.digest == D2
    assert "expires_at" not in _hint(dynamodb, state_table, "AWAITING", waiting[1])
    # a request that lapses: not listed
    assert store.promotions.lapse_approval(waiting[1], D2, 0, later + 90_000)
    assert store.promotions.awaiting(100, later + 90_001) == []


def test_get_targets_empty(store: State) -> None:
    assert store.targets.get_many([]) == {}


def test_non_condition_errors_propagate(dynamodb) -> None:
    broken = dynamodb_state(dynamodb, "no-such-table")
    with pytest.raises(ClientError) as info:
        broken.tags.record(NGINX_LATEST, D1, 100, "poll")
    assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError):
        broken.targets.claim(TARGET, NGINX_LATEST, D1, 100, "poll", now=1)


@pytest.mark.parametrize("ended", ["released", "lapsed"])
def test_a_target_held_before_any_rollout_is_claimed_once_its_hold_ends(store: State, ended: str) -> None:
    """A person may hold a target tagpin never applied anything to: its item holds only the hold
    (no digest, no observation). Once released or lapsed, the next move claims it (it used to be
    refused as superseded for ever; found by tests/unit/test_admission_agreement.py)."""
    target = "dev/demo/Deployment/web/app"
    until = 2_000 if ended == "lapsed" else None
    assert store.targets.hold(target, "", 1_000, reason="a person", trigger=Trigger.MANUAL, until=until)
    assert not store.targets.claim(target, NGINX_LATEST, D1, 50, Trigger.POLL, 1_500)  # held
    if ended == "released":
        assert store.targets.release(target, 1_800, reason="a person", trigger=Trigger.MANUAL)
    assert store.targets.claim(target, NGINX_LATEST, D1, 50, Trigger.POLL, 3_000)
    state = store.targets.get(target)
    assert state is not None and (state.status, state.digest) == (TargetStatus.PENDING, D1)
