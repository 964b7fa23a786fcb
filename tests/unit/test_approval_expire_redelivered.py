"""An approval request lapses even when the consumer stops between writing it and sending its
``expire`` verification (a Lambda timeout, SQS unreachable): the change is delivered again, finds
the request already made by it, and sends the ``expire`` again, for that request's expiry (not a
new one), without announcing it again. A request a person decided meanwhile gets nothing. The Applier
over moto's DynamoDB and a fake cluster; a first wave that needs approval (``images[].approval``)."""

from __future__ import annotations

import pytest
from tagpin.domain.config import RolloutSettings
from tagpin.domain.messages import Change, Verification, VerificationKind
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import VerificationOutcome
from tagpin.ports.notify import RolloutEventKind
from tagpin.ports.state import ImageEvent, PromotionStatus, State
from tagpin.ports.workloads import Workload
from tagpin.usecases.apply import Applier
from tagpin.usecases.approvals import ApprovalOutcome, Approvals, Via
from tagpin.usecases.waves import plan

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0, D1, WEB
from tests.support.notify import RecordingNotifier
from tests.support.queues import FirstSendFails, ListQueue, Unreachable
from tests.unit.test_rollout import ROLLOUT_CONFIG

NOW = 1_800_000_000_000
SETTINGS = RolloutSettings(verify_interval_seconds=10, approval_expires_seconds=600)
FOLLOWED = {WEB: ROLLOUT_CONFIG.followed[WEB].model_copy(update={"approval": True})}
CHANGE = Change(move=Move(image=WEB, digest=D1, observed_at=1_000, trigger="poll"))


class Consumer:
    """The consumer's use cases over one state and one changes queue (the verifications on it); a
    fresh ``Applier`` each delivery, as a new invocation builds."""

    def __init__(self, store: State) -> None:
        self.store = store
        self.clock = FakeClock(NOW, step=1)
        self.verifications = FirstSendFails()  # the first attempt dies at the expire's send
        self.notifier = RecordingNotifier()
        self.clusters = FakeClusters(
            dev=FakeCluster([Workload("100", {"app": f"{WEB}@{D0}"}, namespace="demo", name="web")])
        )
        self.approvals = Approvals(
            state=store,
            settings=lambda: SETTINGS,
            changes=ListQueue(),
            verifications=self.verifications,
            notifier=self.notifier,
            clock=self.clock,
        )

    def deliver(self, change: Change = CHANGE) -> None:
        Applier(
            followed=lambda: FOLLOWED,
            state=self.store,
            workloads=self.clusters,
            clock=self.clock,
            settings=lambda: SETTINGS,
            verifications=self.verifications,
            notifier=self.notifier,
            approvals=self.approvals,
        ).apply(change)

    def first_attempt_dies(self) -> int:
        """The change's first delivery asks, and dies sending the expire: the request's expiry."""
        with pytest.raises(Unreachable):  # the invocation fails: the message is not deleted
            self.deliver()
        promotion = self.store.promotions.get(WEB)
        assert promotion is not None and promotion.awaiting_approval and promotion.awaiting_wave == 0
        assert promotion.approval_expires_at is not None
        assert self.verifications.sent == []
        return promotion.approval_expires_at

    def expires(self) -> list[tuple[Verification, int]]:
        return [(v, d) for v, d in self.verifications.sent if v.kind is VerificationKind.EXPIRE]

    def asked(self) -> int:
        return sum(e.event is RolloutEventKind.AWAITING_APPROVAL for e in self.notifier.sent)


def test_a_request_whose_expire_was_not_sent_lapses_once_the_change_comes_back(store: State) -> None:
    consumer = Consumer(store)
    expires_at = consumer.first_attempt_dies()

    consumer.clock.now += 60_000  # the message's visibility timeout: delivered again
    redelivered_at = consumer.clock.now
    consumer.deliver()
    ((expire, delay_s),) = consumer.expires()
    assert (expire.move.image, expire.move.digest, expire.attempt) == (WEB, D1, 0)
    # the request's expiry, not a new one: ~540 s from the redelivery, not 600
    assert abs(delay_s - (expires_at - redelivered_at) / 1000) < 1
    assert consumer.asked() == 1  # announced once, by the first attempt
    promotion = store.promotions.get(WEB)
    assert promotion is not None and promotion.approval_expires_at == expires_at

    consumer.clock.now = expires_at  # the expire is due: nobody decided
    result = consumer.approvals.expire(expire)
    assert result.outcome is VerificationOutcome.FAILED
    promotion = store.promotions.get(WEB)
    assert promotion is not None and promotion.status is PromotionStatus.HALTED
    events = [e.event for e in store.history.of_image(WEB) if e.digest == D1]
    assert events.count(ImageEvent.LAPSED) == 1 and events.count(ImageEvent.AWAITING_APPROVAL) == 1


def test_a_request_redelivered_after_its_expiry_lapses_at_once(store: State) -> None:
    """Delivered again only after the request's time is up (the message came back late): the
    expire is sent due now, and lapses the request."""
    consumer = Consumer(store)
    expires_at = consumer.first_attempt_dies()
    consumer.clock.now = expires_at + 5_000
    consumer.deliver()
    ((expire, delay_s),) = consumer.expires()
    assert delay_s == 0
    assert consumer.approvals.expire(expire).outcome is VerificationOutcome.FAILED
    promotion = store.promotions.get(WEB)
    assert promotion is not None and promotion.status is PromotionStatus.HALTED


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "rejected"])
def test_a_request_decided_before_the_change_comes_back_gets_no_expire(store: State, approve: bool) -> None:
    consumer = Consumer(store)
    consumer.first_attempt_dies()
    decided = consumer.approvals.decide(WEB, approve, "ana", Via.CLI)
    assert decided.decision is (ApprovalOutcome.APPROVED if approve else ApprovalOutcome.REJECTED)

    consumer.clock.now += 60_000
    consumer.deliver()
    assert consumer.expires() == []
    assert consumer.asked() == 1


def test_a_request_decided_between_the_consumers_read_and_its_write_gets_no_expire(store: State) -> None:
    """The redelivered change read the promotion still waiting; a person approved before its
    request's write: that write fails on a decided request, and nothing is sent."""
    consumer = Consumer(store)
    consumer.first_attempt_dies()
    read = store.promotions.get(WEB)
    assert read is not None and read.awaiting_approval
    assert consumer.approvals.decide(WEB, True, "ana", Via.CONSOLE).decision is ApprovalOutcome.APPROVED
    wave = plan(SETTINGS, list(FOLLOWED[WEB].targets))[0]
    assert not consumer.approvals.request(CHANGE.move, read, wave)
    assert consumer.expires() == []
    assert consumer.asked() == 1


def test_another_change_of_the_waiting_digest_sends_no_expire(store: State) -> None:
    """Only the change that asked sends the expire again. The reconciler's healing change of the
    waiting wave's targets comes every run while the wave waits: were it to send one, each run
    would start one more chain of expire messages (every 15 minutes until the request's expiry)."""
    consumer = Consumer(store)
    consumer.first_attempt_dies()
    consumer.clock.now += 300_000  # the reconciler's run, the request still open
    run = "run-1"
    healing = Change(
        move=CHANGE.move.model_copy(
            update={"trigger": "reconcile", "correlation_id": run, "observed_at": consumer.clock.now}
        )
    )
    for _run in range(3):
        consumer.deliver(healing.model_copy(update={"reconcile_run": run}))
    assert consumer.expires() == []
    assert consumer.asked() == 1
    promotion = store.promotions.get(WEB)
    assert promotion is not None and promotion.awaiting_approval

    consumer.deliver()  # the change that asked, delivered again: its expire
    ((expire, _delay_s),) = consumer.expires()
    assert expire.attempt == 0
