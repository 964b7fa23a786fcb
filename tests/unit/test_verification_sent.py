"""A change's verification is sent even when the consumer stops between recording a target
``applied`` and sending its verification (a Lambda timeout, SQS unreachable): the change is
delivered again and its retry sends the verification, so the rollout is verified and its waves go on.
The Applier over moto's DynamoDB and a fake cluster."""

from __future__ import annotations

import pytest
from tagpin.domain.config import RolloutSettings
from tagpin.domain.messages import Change
from tagpin.domain.moves import Move
from tagpin.ports.state import State, TargetStatus
from tagpin.ports.workloads import Workload
from tagpin.usecases.apply import Applier

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0, D1, WEB, WEB_TARGET
from tests.support.queues import FirstSendFails, Unreachable
from tests.unit.test_rollout import ROLLOUT_CONFIG


def test_a_verification_not_sent_is_sent_when_the_change_comes_back(store: State) -> None:
    clusters = FakeClusters(
        dev=FakeCluster([Workload("100", {"app": f"{WEB}@{D0}"}, namespace="demo", name="web")])
    )
    queue = FirstSendFails()
    clock = FakeClock(1_800_000_000_000, step=1_000)

    def applier() -> Applier:  # a fresh process each delivery
        return Applier(
            followed=lambda: ROLLOUT_CONFIG.followed,
            state=store,
            workloads=clusters,
            clock=clock,
            settings=lambda: RolloutSettings(verify_interval_seconds=10),
            verifications=queue,
        )

    change = Change(move=Move(image=WEB, digest=D1, observed_at=1_000, trigger="poll"))
    with pytest.raises(Unreachable):  # the invocation fails: the message is not deleted
        applier().apply(change)
    st = store.targets.get(WEB_TARGET)
    assert st is not None and (st.status, st.digest) == (TargetStatus.APPLIED, D1)
    assert queue.sent == []

    clock.now += 60_000  # the message's visibility timeout: delivered again
    applier().apply(change)
    assert [(v.target_id, v.move.digest) for v, _ in queue.sent] == [(WEB_TARGET, D1)]
