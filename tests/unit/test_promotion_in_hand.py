"""The consumer's change evaluates its promotion with what it holds (``Promoter.evaluate``'s
``in_hand`` and ``verifying``) instead of reading it again: generated sequences in which the
promotion in hand is older than the stored one (another evaluation verified or advanced it, a newer
digest superseded it, the plan changed) keep every promise of the state machine
(tests/unit/test_promotion_states.py): a promotion only moves forward, a wave started is in the
plan, a complete one is never rolling again, and what an in-hand evaluation reports moved is so."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from tagpin.domain.outcomes import VerificationOutcome
from tagpin.ports.state import Promotion, PromotionStatus
from tagpin.usecases.promote import done
from tagpin.usecases.waves import plan

from tests.unit.test_promotion_states import IMAGE, TARGETS, Promotions


class InHand(Promotions):
    def __init__(self) -> None:
        super().__init__()
        self.held: list[Promotion] = []

    @rule()
    def read_by_a_change(self) -> None:
        """A change reads (or starts) the promotion; it evaluates it later, after its patches."""
        promotion = self.state.promotions.get(IMAGE)
        if promotion is not None:
            self.held.append(promotion)

    @precondition(lambda self: bool(self.held))
    @rule(which=st.integers(0, 3), verifying=st.sets(st.sampled_from([t.id for t in TARGETS])))
    def evaluate_in_hand(self, which: int, verifying: set[str]) -> None:
        held = self.held[-1 - min(which, len(self.held) - 1)]
        before = self.state.promotions.get(IMAGE)
        result = self.promoter.evaluate(
            IMAGE, held.digest, in_hand=(held, self.followed[IMAGE]), verifying=frozenset(verifying)
        )
        self.results.append(result)
        after = self.state.promotions.get(IMAGE)
        assert after is not None and before is not None
        if result.outcome is VerificationOutcome.WAVE_STARTED:
            assert after.digest == held.digest and after.wave > before.wave
        if result.outcome is VerificationOutcome.COMPLETE:
            assert after.digest == held.digest and after.status is PromotionStatus.COMPLETE
        if (
            before.wave_verified_at is None
            and after.wave_verified_at is not None
            and (after.digest, after.wave) == (before.digest, before.wave)
        ):  # this evaluation verified the wave: every target of it is done (as a fresh read sees)
            waves = plan(self.settings(), TARGETS)
            wave = waves[min(after.wave, len(waves) - 1)]
            states = self.state.targets.get_many([t.id for t in wave.targets])
            assert all(done(states.get(t.id), after.digest, self.settings().verify) for t in wave.targets)


InHand.TestCase.settings = settings(
    max_examples=40, stateful_step_count=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestInHand = InHand.TestCase
