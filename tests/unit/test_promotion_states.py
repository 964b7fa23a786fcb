"""The promotion state machine never throws: generated sequences of pushes, applies, verifications,
evaluations (duplicated, as at-least-once delivery makes them), soaks and changes of the wave plan,
against the real state repositories on moto and the real ``Promoter``.

Found this way (and in the field: "IndexError: list index out of range" at ``following = waves[index
+ 1]``): a promotion whose last wave was verified by one evaluation, which did not get to complete
it before another evaluation read it, was advanced past the plan. ``evaluate`` is now total: every
stored promotion and every plan gives an answer.
"""

from __future__ import annotations

import boto3
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from moto import mock_aws
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.config import FollowedImage, RolloutSettings, Target, Wave
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import VerificationOutcome, VerificationResult
from tagpin.ports.state import PromotionStatus, TargetStatus
from tagpin.usecases.promote import Promoter
from tagpin.usecases.waves import plan

from tests.support.aws import create_table
from tests.support.clock import FakeClock
from tests.support.constants import REGION, STATE_TABLE
from tests.support.queues import ListQueue, ListVerificationQueue
from tests.support.trail import start_promotion

IMAGE = "registry.example.com/team/app:stable"
TARGETS = [
    Target(cluster="stage", namespace="app", name="web", container="app"),
    Target(cluster="prod", namespace="app", name="web", container="app"),
    Target(cluster="prod", namespace="edge", name="web", container="app"),
]
PLANS = {  # the configuration's waves, which may change while a promotion is under way
    "none": [],
    "stage-prod": [Wave(name="stage", clusters=["stage"]), Wave(name="prod", clusters=["prod"])],
    "stage-only": [Wave(name="stage", clusters=["stage"])],
    "empty-first": [Wave(name="canary", clusters=["nowhere"]), Wave(name="stage", clusters=["stage"])],
}


class Promotions(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        db = boto3.client("dynamodb", region_name=REGION)
        create_table(db, STATE_TABLE, ("pk", "sk"))
        self.state = dynamodb_state(db, STATE_TABLE)
        self.clock = FakeClock(1_800_000_000_000, step=1)
        self.plan = "none"
        self.followed = {IMAGE: FollowedImage(image=IMAGE, targets=TARGETS)}
        self.promoter = Promoter(
            state=self.state,
            followed=lambda: self.followed,
            settings=self.settings,
            verifications=ListVerificationQueue(),
            changes=ListQueue(),
            notifier=None,
            clock=self.clock,
        )
        self.digests: list[str] = []
        self.results: list[VerificationResult] = []
        self.seen: dict[str, tuple[int, PromotionStatus]] = {}

    def settings(self) -> RolloutSettings:
        return RolloutSettings(waves=PLANS[self.plan], soak_seconds=5)

    def teardown(self) -> None:
        self.mock.stop()

    @initialize(name=st.sampled_from(sorted(PLANS)))
    def first_push(self, name: str) -> None:
        self.plan = name
        self.push()

    @rule()
    def push(self) -> None:
        """A new digest: its promotion starts at the first wave (the consumer's first step)."""
        digest = "sha256:" + f"{len(self.digests) + 1:x}".rjust(64, "0")
        self.digests.append(digest)
        now = self.clock()
        start_promotion(self.state, IMAGE, digest, now)

    @rule(data=st.data())
    def apply_active_waves(self, data: st.DataObject) -> None:
        """The consumer patches the targets of the waves the promotion has reached."""
        promotion = self.state.promotions.get(IMAGE)
        assume_rolling = promotion is not None and promotion.status is PromotionStatus.ROLLING
        if not assume_rolling:
            return
        assert promotion is not None
        for wave in plan(self.settings(), TARGETS):
            if wave.index > promotion.wave:
                continue
            for target in wave.targets:
                if data.draw(st.booleans()):
                    now = self.clock()
                    if self.state.targets.claim(
                        target.id, IMAGE, promotion.digest, promotion.observed_at, Trigger.POLL, now
                    ):
                        self.state.targets.finish(
                            target.id, promotion.digest, TargetStatus.APPLIED, now, trigger=Trigger.POLL
                        )

    @rule()
    def roll_out_active_waves(self) -> None:
        """Every target of the reached waves patched and rolled out (the common, uneventful case)."""
        promotion = self.state.promotions.get(IMAGE)
        if promotion is None or promotion.status is not PromotionStatus.ROLLING:
            return
        for wave in plan(self.settings(), TARGETS):
            for target in wave.targets if wave.index <= promotion.wave else []:
                now = self.clock()
                if self.state.targets.claim(
                    target.id, IMAGE, promotion.digest, promotion.observed_at, Trigger.POLL, now
                ):
                    self.state.targets.finish(
                        target.id, promotion.digest, TargetStatus.APPLIED, now, trigger=Trigger.POLL
                    )
                    self.state.targets.finish(
                        target.id,
                        promotion.digest,
                        TargetStatus.VERIFIED,
                        self.clock(),
                        trigger=Trigger.VERIFY,
                    )

    @rule(index=st.integers(0, len(TARGETS) - 1))
    def verify(self, index: int) -> None:
        """A verification finds the target rolled out."""
        st_ = self.state.targets.get(TARGETS[index].id)
        if st_ is not None:
            self.state.targets.finish(
                st_.target_id,
                st_.digest,
                TargetStatus.VERIFIED,
                self.clock(),
                trigger=Trigger.VERIFY,
                expected=frozenset({TargetStatus.APPLIED}),
            )

    @precondition(lambda self: bool(self.digests))
    @rule(which=st.integers(0, 3), times=st.integers(1, 3))
    def evaluate(self, which: int, times: int) -> None:
        """Verifications and soak ends evaluate the promotion, some of them twice or for an old digest."""
        digest = self.digests[-1 - min(which, len(self.digests) - 1)]
        for _ in range(times):
            result = self.promoter.evaluate(IMAGE, digest)
            self.results.append(result)
            promotion = self.state.promotions.get(IMAGE)
            assert promotion is not None
            if result.outcome is VerificationOutcome.COMPLETE:
                assert promotion.digest == digest and promotion.status is PromotionStatus.COMPLETE
            if result.outcome is VerificationOutcome.WAVE_STARTED:
                waves = plan(self.settings(), TARGETS)
                assert promotion.wave < len(waves) and waves[promotion.wave].targets

    @rule(seconds=st.sampled_from([1, 5, 60]))
    def soak(self, seconds: int) -> None:
        self.clock.advance(seconds * 1000)

    @rule(name=st.sampled_from(sorted(PLANS)))
    def change_plan(self, name: str) -> None:
        self.plan = name

    @rule()
    def verified_wave_stored_but_not_completed(self) -> None:
        """The field's sequence: a wave marked verified by one evaluation that stopped there."""
        promotion = self.state.promotions.get(IMAGE)
        if promotion is not None and promotion.status is PromotionStatus.ROLLING:
            self.state.promotions.wave_verified(IMAGE, promotion.digest, promotion.wave, self.clock())

    @invariant()
    def answers_are_results(self) -> None:
        assert all(isinstance(r, VerificationResult) for r in self.results)

    @invariant()
    def a_promotion_only_moves_forward(self) -> None:
        """For one digest: the wave index never goes back, and complete never becomes rolling again."""
        promotion = self.state.promotions.get(IMAGE)
        if promotion is None:
            return
        seen = self.seen.get(promotion.digest)
        if seen is not None:
            wave, status = seen
            assert promotion.wave >= wave
            if status is PromotionStatus.COMPLETE:
                assert promotion.status is PromotionStatus.COMPLETE
        self.seen[promotion.digest] = (promotion.wave, promotion.status)


Promotions.TestCase.settings = settings(
    max_examples=40, stateful_step_count=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestPromotions = Promotions.TestCase


def test_the_fields_sequence_completes_instead_of_throwing(aws: None) -> None:
    """One implicit wave; its verification stored, the promotion still rolling: evaluate completes it."""
    db = boto3.client("dynamodb", region_name=REGION)
    create_table(db, STATE_TABLE, ("pk", "sk"))
    state = dynamodb_state(db, STATE_TABLE)
    promoter = Promoter(
        state=state,
        followed=lambda: {IMAGE: FollowedImage(image=IMAGE, targets=TARGETS[:1])},
        settings=RolloutSettings,
        verifications=ListVerificationQueue(),
        changes=ListQueue(),
        notifier=None,
        clock=FakeClock(10_000, step=1),
    )
    digest = "sha256:" + "a" * 64
    start_promotion(state, IMAGE, digest, 1)
    assert state.promotions.wave_verified(IMAGE, digest, 0, 2)
    result = promoter.evaluate(IMAGE, digest)
    assert result.outcome is VerificationOutcome.COMPLETE
    stored = state.promotions.get(IMAGE)
    assert stored is not None and stored.status is PromotionStatus.COMPLETE and stored.wave == 0


@pytest.mark.parametrize("stored_wave", [0, 1, 5])
def test_a_stored_wave_past_the_plan_completes(aws: None, stored_wave: int) -> None:
    """Waves were removed from the configuration after the promotion had reached them."""
    db = boto3.client("dynamodb", region_name=REGION)
    create_table(db, STATE_TABLE, ("pk", "sk"))
    state = dynamodb_state(db, STATE_TABLE)
    digest = "sha256:" + "b" * 64
    start_promotion(state, IMAGE, digest, 1)
    if stored_wave:
        assert state.promotions.wave_verified(IMAGE, digest, 0, 2)
        assert state.promotions.advance(IMAGE, digest, 0, 3, to=stored_wave)
    for target in TARGETS:
        state.targets.claim(target.id, IMAGE, digest, 1, Trigger.POLL, 4)
        state.targets.finish(target.id, digest, TargetStatus.VERIFIED, 5, trigger=Trigger.VERIFY)
    promoter = Promoter(
        state=state,
        followed=lambda: {IMAGE: FollowedImage(image=IMAGE, targets=TARGETS)},
        settings=RolloutSettings,  # no configured waves now: one implicit wave
        verifications=ListVerificationQueue(),
        changes=ListQueue(),
        notifier=None,
        clock=FakeClock(10_000, step=1),
    )
    assert promoter.evaluate(IMAGE, digest).outcome is VerificationOutcome.COMPLETE
