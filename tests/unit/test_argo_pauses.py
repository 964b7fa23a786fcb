"""A paused Argo Rollout's verification chain is bounded: while the rollout is paused the consumer
looks again every ``verify_interval_seconds`` for as long as a rollout may take
(``verify_timeout_seconds``), then less and less often (each wait about doubles, up to 15 minutes),
and a pause longer than
``rollout.max_pause_seconds`` ends the chain: the target is recorded ``stalled`` and announced
once, and nothing is rolled back, marked bad or halted (a pause is a person's or the Rollout's own
decision). The verifier with a fake cluster and the state table on moto, as in
tests/unit/test_argo_rollouts.py."""

from __future__ import annotations

from tagpin.domain.config import Kind, RolloutSettings
from tagpin.domain.messages import Verification
from tagpin.domain.outcomes import VerificationOutcome
from tagpin.ports.notify import RolloutEventKind
from tagpin.ports.queues import MAX_DELAY_S
from tagpin.ports.state import ImageEvent, PromotionStatus, TargetStatus

from tests.unit.test_argo_rollouts import CANARY, IMAGE, PAUSED, PINNED, World, argo

DAY_S = 86400


def follow_the_pause(world: World, start_s: int = 5) -> list[tuple[int, int, VerificationOutcome]]:
    """Hand each verification the consumer sends back to it when it is due, while the rollout stays
    paused, until the chain ends: (when, the delay asked for, the outcome) of each look."""
    looks: list[tuple[int, int, VerificationOutcome]] = []
    verification: Verification | None = None
    at = start_s
    while True:
        result = world.verify(after_s=at, verification=verification)
        if not world.queue.sent:
            looks.append((at, 0, result.outcome))
            return looks
        ((verification, delay),) = world.queue.sent
        looks.append((at, delay, result.outcome))
        at += delay
        assert len(looks) < 10_000, "the chain does not end"


def test_a_pause_is_looked_at_less_and_less_often(store):
    world = World(store, argo(CANARY), max_pause_seconds=2 * 3600)
    world.phase(**PAUSED)
    looks = follow_the_pause(world)
    delays = [delay for _, delay, outcome in looks if outcome is VerificationOutcome.PAUSED]
    # every 10 s (verify_interval_seconds) for the 60 s a rollout may take (verify_timeout_seconds),
    # then each wait as long as the time past those 60 s: doubling, up to 15 minutes
    assert delays[:14] == [10] * 8 + [20, 40, 80, 160, 320, 640]
    assert max(delays) == MAX_DELAY_S == 900 and delays[14:-1] == [900] * 6
    # the last wait ends when the pause reaches max_pause_seconds: the stall is recorded on time
    (last_at, _, outcome) = looks[-1]
    assert outcome is VerificationOutcome.STALLED and last_at == 5 + 2 * 3600
    assert len(looks) == 22  # not 720 looks at 10 s


def test_a_pause_longer_than_the_maximum_is_stalled_once_and_nothing_is_rolled_back(store):
    defaults = RolloutSettings()  # 20 s, 900 s, and max_pause_seconds 7 days
    world = World(
        store,
        argo(CANARY),
        verify_interval_seconds=defaults.verify_interval_seconds,
        verify_timeout_seconds=defaults.verify_timeout_seconds,
    )
    world.phase(**{**PAUSED, "message": "manually paused"})
    looks = follow_the_pause(world)
    (end, _, outcome) = looks[-1]
    assert outcome is VerificationOutcome.STALLED and end == 5 + 7 * DAY_S
    # every verification of a week-long pause, bounded: 45 in its first 15 minutes (20 s apart),
    # then about one each 15 minutes (672 in a week), not 30,240 at 20 s
    assert len(looks) == 723  # docs/rollouts.md: "about 720 verifications"

    st = store.targets.get(world.target.id)
    assert (
        st is not None and st.status is TargetStatus.STALLED and st.digest == world.verification.move.digest
    )
    assert st.detail is not None and st.detail.startswith("stalled: paused for 168.0 h (Paused:")
    assert "rollout.max_pause_seconds (604800 s)" in st.detail and "not rolled back" in st.detail
    # a person's pause is not a failure: nothing patched back, nothing marked bad, nothing halted
    assert world.cluster.patches == [] and world.cluster.image("shop", Kind.ROLLOUT, "web", "app") == PINNED
    tag = store.tags.get(IMAGE)
    assert tag is not None and not tag.blocked
    promotion = store.promotions.get(IMAGE)
    assert promotion is not None and promotion.status is PromotionStatus.ROLLING  # its wave waits
    (event,) = world.notifier.sent
    assert event.event is RolloutEventKind.STALLED and event.targets == [world.target.id]
    assert "STALLED" in event.summary() and "not rolled back" in event.summary()
    assert ImageEvent.STALLED.value in [e.event for e in store.history.of_image(IMAGE)]

    # the last verification delivered again (at least once): decided, no second notice, no resend
    again = world.verify(after_s=end + 60)
    assert again.outcome is VerificationOutcome.ALREADY_DECIDED and world.queue.sent == []
    assert len(world.notifier.sent) == 1
    # nothing re-applies the digest: a stalled target is settled for the level checks
    assert st.settled_at(world.verification.move.digest)


def test_a_new_pause_counts_from_its_own_start(store):
    """A canary promoted past one pause and held at the next: the second pause's length starts when
    it is first seen, not at the first pause."""
    world = World(store, argo(CANARY), max_pause_seconds=3600)
    world.phase(**PAUSED)
    world.verify(after_s=10)
    ((paused, _),) = world.queue.sent
    assert paused.paused_since == world.applied + 10_000
    world.verify(after_s=3000, verification=paused)  # still paused: the same pause, 2990 s long
    ((paused, delay),) = world.queue.sent
    assert paused.paused_since == world.applied + 10_000 and delay == 610  # then 3600 s long
    world.phase(phase="Progressing", stableRS="old")  # promoted: the next steps
    world.verify(after_s=3030, verification=paused)
    ((progressing, delay),) = world.queue.sent
    assert progressing.paused_since is None and delay == 10
    world.phase(**PAUSED)  # the next pause step
    world.verify(after_s=3040, verification=progressing)
    ((second, delay),) = world.queue.sent
    assert second.paused_since == world.applied + 3_040_000 and delay == 10
    result = world.verify(after_s=6040, verification=second)  # 3000 s into the second pause
    assert result.outcome is VerificationOutcome.PAUSED  # (6030 s after the first one began)
    assert world.target_status() is TargetStatus.APPLIED
    result = world.verify(after_s=6640, verification=world.queue.sent[0][0])
    assert result.outcome is VerificationOutcome.STALLED and "paused for 1.0 h" in result.detail
