"""StateStore against moto's DynamoDB: conditional writes decide, history records every outcome."""

from __future__ import annotations

import threading

import pytest
from botocore.exceptions import ClientError
from tagpin.state import StateStore, TagRecord, TagUpdate, TargetStatus

IMAGE = "docker.io/library/nginx:latest"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
D3 = "sha256:" + "3" * 64
TARGET = "dev/default/Deployment/web/nginx"


# -- followed tags ----------------------------------------------------------------------------------


def test_first_sighting_is_changed_without_previous(store: StateStore) -> None:
    record = store.record_tag(IMAGE, D1, 100, "poll")
    assert record.result is TagUpdate.CHANGED
    assert record.previous_digest is None
    assert record.current.digest == D1
    assert record.current.observed_at == 100
    stored = store.get_tag(IMAGE)
    assert stored is not None
    assert (stored.digest, stored.observed_at, stored.changed_at, stored.checked_at) == (D1, 100, 100, 100)
    assert stored.last_error is None


def test_get_tag_unknown_is_none(store: StateStore) -> None:
    assert store.get_tag("docker.io/library/redis:7") is None


def test_same_digest_later_is_unchanged_and_moves_checked_at(store: StateStore) -> None:
    store.record_tag(IMAGE, D1, 100, "poll")
    record = store.record_tag(IMAGE, D1, 200, "webhook")
    assert record.result is TagUpdate.UNCHANGED
    assert record.previous_digest == D1
    assert record.current.digest == D1
    assert record.current.observed_at == 200
    assert record.current.checked_at == 200
    assert record.current.changed_at == 100  # the digest did not change at 200
    stored = store.get_tag(IMAGE)
    assert stored is not None
    assert (stored.observed_at, stored.changed_at, stored.checked_at) == (200, 100, 200)


def test_new_digest_later_is_changed_with_previous(store: StateStore) -> None:
    store.record_tag(IMAGE, D1, 100, "poll")
    record = store.record_tag(IMAGE, D2, 200, "poll")
    assert record.result is TagUpdate.CHANGED
    assert record.previous_digest == D1
    assert record.current.digest == D2
    stored = store.get_tag(IMAGE)
    assert stored is not None
    assert (stored.digest, stored.observed_at, stored.changed_at) == (D2, 200, 200)


def test_older_observation_with_another_digest_is_stale(store: StateStore) -> None:
    store.record_tag(IMAGE, D2, 200, "poll")
    record = store.record_tag(IMAGE, D1, 150, "webhook")
    assert record.result is TagUpdate.STALE
    assert record.current.digest == D2  # the stored, newer state
    assert record.current.observed_at == 200
    stored = store.get_tag(IMAGE)
    assert stored is not None
    assert (stored.digest, stored.observed_at) == (D2, 200)


def test_older_observation_with_the_same_digest_is_unchanged_and_keeps_observed_at(store: StateStore) -> None:
    store.record_tag(IMAGE, D1, 200, "poll")
    record = store.record_tag(IMAGE, D1, 150, "poll")
    assert record.result is TagUpdate.UNCHANGED
    stored = store.get_tag(IMAGE)
    assert stored is not None
    assert stored.observed_at == 200  # never moves backwards


def test_equal_observed_at_with_another_digest_is_stale(store: StateStore) -> None:
    store.record_tag(IMAGE, D1, 100, "poll")
    assert store.record_tag(IMAGE, D2, 100, "poll").result is TagUpdate.STALE
    stored = store.get_tag(IMAGE)
    assert stored is not None
    assert stored.digest == D1


def test_tags_are_independent(store: StateStore) -> None:
    store.record_tag(IMAGE, D1, 100, "poll")
    other = "docker.io/library/nginx:1.27"
    assert store.record_tag(other, D2, 50, "poll").result is TagUpdate.CHANGED
    assert store.get_tag(IMAGE).digest == D1  # type: ignore[union-attr]


@pytest.mark.parametrize("threads", [8])
def test_concurrent_identical_observations_change_exactly_once(store: StateStore, threads: int) -> None:
    store.record_tag(IMAGE, D1, 100, "poll")
    barrier = threading.Barrier(threads)
    results: dict[int, TagUpdate] = {}
    errors: list[BaseException] = []

    def observe(at: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[at] = store.record_tag(IMAGE, D2, at, "webhook").result
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
    assert outcomes.count(TagUpdate.CHANGED) == 1
    assert outcomes.count(TagUpdate.UNCHANGED) == threads - 1
    stored = store.get_tag(IMAGE)
    assert stored is not None
    assert stored.digest == D2
    assert stored.observed_at == max(times)  # the newest observation wins the "last seen" mark


def test_concurrent_first_sightings_change_exactly_once(store: StateStore) -> None:
    threads = 8
    barrier = threading.Barrier(threads)
    results: list[TagRecord] = []
    lock = threading.Lock()

    def observe(at: int) -> None:
        barrier.wait(timeout=10)
        record = store.record_tag(IMAGE, D3, at, "poll")
        with lock:
            results.append(record)

    workers = [threading.Thread(target=observe, args=(500 + i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert len(results) == threads
    changed = [r for r in results if r.result is TagUpdate.CHANGED]
    assert len(changed) == 1
    assert changed[0].previous_digest is None


def test_record_tag_error_keeps_the_digest(store: StateStore) -> None:
    store.record_tag(IMAGE, D1, 100, "poll")
    store.record_tag_error(IMAGE, "RegistryError: 503 Service Unavailable", 150)
    stored = store.get_tag(IMAGE)
    assert stored is not None
    assert stored.digest == D1
    assert stored.observed_at == 100
    assert stored.last_error == "RegistryError: 503 Service Unavailable"
    assert stored.error_at == 150
    # A later successful check clears the error.
    assert store.record_tag(IMAGE, D1, 200, "poll").result is TagUpdate.UNCHANGED
    cleared = store.get_tag(IMAGE)
    assert cleared is not None
    assert cleared.last_error is None
    assert cleared.error_at is None


def test_record_tag_error_truncates_long_messages(store: StateStore) -> None:
    store.record_tag(IMAGE, D1, 100, "poll")
    store.record_tag_error(IMAGE, "x" * 5000, 150)
    assert len(store.get_tag(IMAGE).last_error or "") == 1000  # type: ignore[union-attr]


def test_first_sighting_after_an_error_is_changed(store: StateStore) -> None:
    """The very first resolution failed (registry down): the error creates the item without a
    digest. The first successful resolution must still count as a change."""
    store.record_tag_error(IMAGE, "ConnectError: refused", 50)
    record = store.record_tag(IMAGE, D1, 100, "poll")
    assert record.result is TagUpdate.CHANGED
    assert record.previous_digest is None
    stored = store.get_tag(IMAGE)
    assert stored is not None
    assert (stored.digest, stored.observed_at, stored.last_error) == (D1, 100, None)


# -- targets ----------------------------------------------------------------------------------------


def test_claim_first_time(store: StateStore) -> None:
    assert store.claim_target(TARGET, IMAGE, D1, 100, "poll", now=110)
    target = store.get_target(TARGET)
    assert target is not None
    assert (target.target_id, target.image, target.digest, target.observed_at) == (TARGET, IMAGE, D1, 100)
    assert target.status is TargetStatus.PENDING
    assert target.updated_at == 110
    assert target.trigger == "poll"


def test_claim_refuses_an_older_observation(store: StateStore) -> None:
    assert store.claim_target(TARGET, IMAGE, D2, 200, "poll", now=210)
    assert not store.claim_target(TARGET, IMAGE, D1, 100, "poll", now=220)
    target = store.get_target(TARGET)
    assert target is not None
    assert (target.digest, target.observed_at, target.updated_at) == (D2, 200, 210)


def test_claim_accepts_a_retry_of_the_same_observation(store: StateStore) -> None:
    assert store.claim_target(TARGET, IMAGE, D1, 100, "webhook", now=110)
    store.finish_target(TARGET, D1, TargetStatus.FAILED, 120, trigger="webhook", detail="Unreachable: x")
    assert store.claim_target(TARGET, IMAGE, D1, 100, "webhook", now=130)
    target = store.get_target(TARGET)
    assert target is not None
    assert target.status is TargetStatus.PENDING
    assert target.detail is None  # the failure detail is cleared on re-claim
    assert target.updated_at == 130


def test_claim_refuses_the_same_time_with_another_digest(store: StateStore) -> None:
    assert store.claim_target(TARGET, IMAGE, D1, 100, "poll", now=110)
    assert not store.claim_target(TARGET, IMAGE, D2, 100, "poll", now=120)
    assert store.get_target(TARGET).digest == D1  # type: ignore[union-attr]


def test_claim_accepts_a_newer_observation(store: StateStore) -> None:
    assert store.claim_target(TARGET, IMAGE, D1, 100, "poll", now=110)
    store.finish_target(TARGET, D1, TargetStatus.APPLIED, 120, trigger="poll")
    assert store.claim_target(TARGET, IMAGE, D2, 200, "poll", now=210)
    target = store.get_target(TARGET)
    assert target is not None
    assert (target.digest, target.status) == (D2, TargetStatus.PENDING)


def test_finish_updates_while_the_digest_is_held(store: StateStore) -> None:
    store.claim_target(TARGET, IMAGE, D1, 100, "poll", now=110)
    held = store.finish_target(
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
    target = store.get_target(TARGET)
    assert target is not None
    assert (target.status, target.updated_at, target.detail, target.previous_image) == (
        TargetStatus.APPLIED,
        120,
        "patched",
        "nginx:1.26",
    )
    (entry,) = store.history(TARGET)
    assert entry["digest"] == D1
    assert entry["status"] == "applied"
    assert entry["at"] == "120"
    assert entry["trigger"] == "poll"
    assert entry["detail"] == "patched"
    assert entry["previous_image"] == "nginx:1.26"
    assert entry["correlation_id"] == "corr-1"


def test_finish_does_not_overwrite_a_newer_claim_but_records_history(store: StateStore) -> None:
    store.claim_target(TARGET, IMAGE, D1, 100, "poll", now=110)
    store.claim_target(TARGET, IMAGE, D2, 200, "poll", now=210)  # a newer change took over
    held = store.finish_target(TARGET, D1, TargetStatus.APPLIED, 220, trigger="poll", detail="patched")
    assert held is False
    target = store.get_target(TARGET)
    assert target is not None
    assert (target.digest, target.status, target.updated_at, target.detail) == (
        D2,
        TargetStatus.PENDING,
        210,
        None,
    )
    (entry,) = store.history(TARGET)
    assert entry["digest"] == D1
    assert entry["status"] == "superseded"


def test_finish_on_an_unknown_target_does_not_create_it(store: StateStore) -> None:
    assert store.finish_target(TARGET, D1, TargetStatus.APPLIED, 100, trigger="poll") is False
    assert store.get_target(TARGET) is None
    assert [e["status"] for e in store.history(TARGET)] == ["superseded"]


def test_history_is_newest_first_and_limited(store: StateStore) -> None:
    store.claim_target(TARGET, IMAGE, D1, 100, "poll", now=100)
    store.finish_target(TARGET, D1, TargetStatus.FAILED, 1_000, trigger="poll", detail="Unreachable")
    store.finish_target(TARGET, D1, TargetStatus.APPLIED, 3_000, trigger="poll")
    store.claim_target(TARGET, IMAGE, D2, 200, "webhook", now=9_000)
    store.finish_target(TARGET, D2, TargetStatus.GONE, 10_000, trigger="webhook", detail="NotFound")
    history = store.history(TARGET)
    assert [(e["at"], e["digest"], e["status"]) for e in history] == [
        ("10000", D2, "gone"),
        ("3000", D1, "applied"),
        ("1000", D1, "failed"),
    ]
    assert [e["at"] for e in store.history(TARGET, limit=2)] == ["10000", "3000"]
    # the target's own STATE item is not part of the history
    assert all(e["sk"].startswith("HIST#") for e in history)
    assert store.history("dev/default/Deployment/other/nginx") == []


def test_get_targets_pages_beyond_one_hundred(store: StateStore, dynamodb, state_table: str) -> None:
    calls: list[int] = []
    real = dynamodb.batch_get_item

    def counting(**kwargs):
        calls.append(sum(len(v["Keys"]) for v in kwargs["RequestItems"].values()))
        return real(**kwargs)

    dynamodb.batch_get_item = counting
    ids = [f"dev/ns/Deployment/app-{i}/c" for i in range(250)]
    items = [
        {
            "PutRequest": {
                "Item": {
                    "pk": {"S": "TARGET#" + target_id},
                    "sk": {"S": "STATE"},
                    "image": {"S": IMAGE},
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
    found = store.get_targets([*ids, ids[1], ids[2]])  # duplicates are asked once
    assert set(found) == {t for i, t in enumerate(ids) if i % 5 != 0}
    assert found[ids[7]].observed_at == 107
    assert found[ids[7]].status is TargetStatus.APPLIED
    assert calls == [100, 100, 50]
    assert all(n <= 100 for n in calls)


def test_get_targets_empty(store: StateStore) -> None:
    assert store.get_targets([]) == {}


def test_non_condition_errors_propagate(dynamodb) -> None:
    broken = StateStore(dynamodb, "no-such-table")
    with pytest.raises(ClientError) as info:
        broken.record_tag(IMAGE, D1, 100, "poll")
    assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError):
        broken.claim_target(TARGET, IMAGE, D1, 100, "poll", now=1)
