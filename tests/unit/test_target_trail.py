"""A target's outcome and its history item land together: a process that dies between writing the
state and writing its item (a Lambda timeout, a crash) leaves neither or both, so the redelivered
message that finds the outcome already decided still finds it in ``tagpin history``
(``tagpin.adapters.dynamodb.targets``: one TransactWriteItems; against moto's DynamoDB)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.adapters.dynamodb.table import Table, UnprocessedError, key
from tagpin.adapters.dynamodb.transaction import put_write, update_write
from tagpin.adapters.kubernetes.workloads import workload_from
from tagpin.domain.config import FollowedImage, Kind, RolloutSettings, Target
from tagpin.domain.messages import Trigger, Verification, VerificationKind
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import VerificationOutcome
from tagpin.ports.state import State, TargetNote, TargetStatus
from tagpin.usecases.promote import Promoter
from tagpin.usecases.verify import Verifier

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters, served
from tests.support.constants import D0, D1, STATE_TABLE
from tests.support.dying import Crash, Dying, Item
from tests.support.queues import ListQueue, ListVerificationQueue
from tests.support.trail import start_promotion

IMAGE = "registry.example.com/team/web:stable"
TARGET = Target(cluster="prod", namespace="shop", kind=Kind.ROLLOUT, name="web", container="app")


def rollout_healthy() -> Any:
    obj = served(
        Kind.ROLLOUT,
        {"replicas": 2, "strategy": {"canary": {}}},
        {"observedGeneration": "2", "phase": "Healthy", "currentPodHash": "new", "stableRS": "new"},
    )
    obj["metadata"].update(namespace="shop", name="web", resourceVersion="7")
    obj["spec"]["template"]["spec"]["containers"] = [{"name": "app", "image": f"{IMAGE}@{D1}"}]
    return workload_from(Kind.ROLLOUT, obj)


def verifier(store: State, clock: FakeClock) -> Verifier:
    followed = {IMAGE: FollowedImage(image=IMAGE, targets=[TARGET])}
    rollout = RolloutSettings(verify_interval_seconds=10, verify_timeout_seconds=60)
    queue = ListVerificationQueue()
    promoter = Promoter(
        state=store,
        followed=lambda: followed,
        settings=lambda: rollout,
        verifications=queue,
        changes=ListQueue(),
        notifier=None,
        clock=clock,
    )
    return Verifier(
        state=store,
        workloads=FakeClusters(prod=FakeCluster([rollout_healthy()])),
        followed=lambda: followed,
        settings=lambda: rollout,
        verifications=queue,
        promoter=promoter,
        notifier=None,
        clock=clock,
    )


def applied(store: State, at: int) -> Verification:
    """The target patched to D1 (D0 before) at ``at``, its verification due."""
    store.tags.record(IMAGE, D1, at, Trigger.POLL)
    start_promotion(store, IMAGE, D1, at)
    assert store.targets.claim(TARGET.id, IMAGE, D1, at, Trigger.POLL, at)
    assert store.targets.finish(
        TARGET.id, D1, TargetStatus.APPLIED, at, trigger=Trigger.POLL, previous_image=f"{IMAGE}@{D0}"
    )
    move = Move(image=IMAGE, digest=D1, observed_at=at, trigger=Trigger.POLL)
    return Verification(kind=VerificationKind.VERIFY, move=move, target_id=TARGET.id, applied_at=at)


def trail(store: State, status: str) -> list[str]:
    return [e.status or "" for e in store.history.of_target(TARGET.id) if e.status == status]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_verification_that_dies_writing_its_history_item_leaves_it_once_redelivered(
    dynamodb: Any, state_table: str, when: str
) -> None:
    """The verifier dies at the write of the 'verified' item (before DynamoDB has it, or after,
    its answer lost); SQS delivers the verification again, to a fresh process: the target is
    verified and its trail says so exactly once."""
    clock = FakeClock(1_800_000_000_000)
    dying = Dying(dynamodb, writes_status(TargetStatus.VERIFIED.value), when)
    first = dynamodb_state(dying, state_table)
    verification = applied(first, clock())
    clock.now += 30_000
    with pytest.raises(Crash):
        verifier(first, clock).verify(verification)
    assert dying.crashed

    clock.now += 30_000  # the message's visibility timeout: delivered again
    again = dynamodb_state(dynamodb, state_table)
    result = verifier(again, clock).verify(verification)
    assert result.outcome in (VerificationOutcome.VERIFIED, VerificationOutcome.ALREADY_DECIDED)
    st_ = again.targets.get(TARGET.id)
    assert st_ is not None and st_.status is TargetStatus.VERIFIED
    assert trail(again, TargetStatus.VERIFIED.value) == [TargetStatus.VERIFIED.value]


# -- any crash, any redelivery ------------------------------------------------------------------------

EXAMPLES = itertools.count()
DECISIONS = [TargetStatus.VERIFIED, TargetStatus.FAILED, TargetStatus.STALLED, TargetStatus.GONE]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    attempts=st.lists(
        st.tuples(st.sampled_from(DECISIONS), st.sampled_from([None, "before", "after"])),
        min_size=1,
        max_size=5,
    )
)
def test_whatever_dies_and_races_the_decided_status_is_in_the_trail_exactly_once(
    dynamodb: Any, state_table: str, attempts: list[tuple[TargetStatus, str | None]]
) -> None:
    """Verifications of one applied target, each deciding a status (the first to land wins, as
    ``expected`` APPLIED makes it) and each perhaps dying at its history item: whatever lands, the
    state's status has exactly one item in the trail and no losing status has any."""
    target_id = f"prod/shop/Rollout/web-{next(EXAMPLES)}/app"  # a target of its own per example
    store = dynamodb_state(dynamodb, state_table)
    assert store.targets.claim(target_id, IMAGE, D1, 1, Trigger.POLL, 1)
    assert store.targets.finish(target_id, D1, TargetStatus.APPLIED, 2, trigger=Trigger.POLL)
    for n, (status, when) in enumerate(attempts):
        client = dynamodb if when is None else Dying(dynamodb, writes_status(status.value), when)
        with contextlib.suppress(Crash):
            dynamodb_state(client, state_table).targets.finish(
                target_id,
                D1,
                status,
                10 + n,
                trigger=Trigger.POLL,
                expected=frozenset({TargetStatus.APPLIED}),
            )
    st_ = store.targets.get(target_id)
    assert st_ is not None
    trail_ = [e.status for e in store.history.of_target(target_id)]
    if st_.status is TargetStatus.APPLIED:
        assert trail_ == [TargetStatus.APPLIED.value]  # every attempt died before its write
    else:
        assert trail_.count(st_.status.value) == 1, trail_
        assert set(trail_) == {st_.status.value, TargetStatus.APPLIED.value}, trail_


def test_an_unexpected_finish_is_noted_superseded_and_writes_no_state(store: State) -> None:
    """Without ``expected``, a finish at a digest the target no longer holds notes the outcome as
    superseded in its trail (as before the transaction) and leaves the state as it was."""
    assert store.targets.claim(TARGET.id, IMAGE, D1, 1, Trigger.POLL, 1)
    assert not store.targets.finish(TARGET.id, D0, TargetStatus.APPLIED, 5, trigger=Trigger.POLL)
    st_ = store.targets.get(TARGET.id)
    assert st_ is not None and (st_.status, st_.digest) == (TargetStatus.PENDING, D1)
    [note] = store.history.of_target(TARGET.id)
    assert (note.status, note.digest) == (TargetNote.SUPERSEDED.value, D0)


# -- the transaction: conditions, and transient cancellations retried ---------------------------------


def cancelled(*codes: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": [{"Code": c} for c in codes],
        },
        "TransactWriteItems",
    )


class Conflicting:
    """A client whose first ``times`` transactions are cancelled by ``codes``."""

    def __init__(self, client: Any, times: int, *codes: str) -> None:
        self._client, self.left, self._codes = client, times, codes
        self.calls = 0

    def transact_write_items(self, **params: Any) -> Any:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise cancelled(*self._codes)
        return self._client.transact_write_items(**params)


def writes(n: int) -> list[Any]:
    return [
        update_write(
            key("TARGET#t"),
            "SET #s = :s",
            condition="attribute_not_exists(pk) OR #s <> :s",
            names={"#s": "status"},
            values={":s": {"S": "verified"}},
        ),
        put_write({**key("TARGET#t", f"HIST#{n:013d}"), "status": {"S": "verified"}}),
    ]


def test_a_transaction_is_all_or_nothing_under_its_condition(dynamodb: Any, state_table: str) -> None:
    table = Table(dynamodb, state_table)
    assert table.transact(writes(1))
    assert not table.transact(writes(2))  # the condition fails: the history item is not written either
    items = dynamodb.scan(TableName=STATE_TABLE)["Items"]
    assert sorted(i["sk"]["S"] for i in items) == [f"HIST#{1:013d}", "STATE"]


@pytest.mark.parametrize("code", ["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"])
def test_a_transient_cancellation_is_retried_after_a_backoff(
    dynamodb: Any, state_table: str, code: str
) -> None:
    slept: list[float] = []
    client = Conflicting(dynamodb, 2, "None", code)
    assert Table(client, state_table, sleep=slept.append).transact(writes(1))
    assert client.calls == 3 and len(slept) == 2
    assert dynamodb.get_item(TableName=STATE_TABLE, Key=key("TARGET#t"))["Item"]["status"]["S"] == "verified"


def test_a_transaction_cancelled_every_time_gives_up(dynamodb: Any, state_table: str) -> None:
    slept: list[float] = []
    client = Conflicting(dynamodb, 100, "TransactionConflict", "None")
    with pytest.raises(UnprocessedError):
        Table(client, state_table, sleep=slept.append).transact(writes(1))
    assert (client.calls, len(slept)) == (10, 9)  # no sleep after the last attempt


@pytest.mark.parametrize(
    ("codes", "written"),
    [(("ConditionalCheckFailed", "None"), False), (("ValidationError", "None"), None)],
)
def test_a_failed_condition_is_an_answer_and_any_other_cancellation_an_error(
    dynamodb: Any, state_table: str, codes: tuple[str, ...], written: bool | None
) -> None:
    table = Table(Conflicting(dynamodb, 1, *codes), state_table)
    if written is None:
        with pytest.raises(ClientError):
            table.transact(writes(1))
    else:
        assert table.transact(writes(1)) is written


def writes_status(status: str) -> Callable[[Item], bool]:
    """A history item of ``status``."""
    return lambda item: (
        item.get("sk", {}).get("S", "").startswith("HIST#") and item.get("status", {}).get("S") == status
    )
