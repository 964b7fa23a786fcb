"""The claims of the moves in flight, kept on a target's state (``TargetState.claims``) against moto's
DynamoDB: each claim adds its time, an outcome or a removal ends them, a hold keeps those it stops
(``held_over_claims``) and a release gives them back (``tagpin.usecases.interrupted``)."""

from __future__ import annotations

from tagpin.domain.messages import Trigger
from tagpin.ports.state import State, TargetStatus
from tagpin.usecases.interrupted import CLAIM_LIFETIME_MS, CLAIMS_KEPT, forget_old_claims

from tests.support.constants import D1, D2, D3, NGINX_LATEST

TARGET = "dev/default/Deployment/web/nginx"


def _claims(store: State) -> frozenset[int]:
    state = store.targets.get(TARGET)
    assert state is not None
    return state.claims


def test_each_claim_adds_its_time_until_an_outcome_ends_them(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=110)
    assert store.targets.claim(TARGET, NGINX_LATEST, D2, 200, Trigger.POLL, now=210)  # over a claim
    assert store.targets.claim(TARGET, NGINX_LATEST, D2, 200, Trigger.POLL, now=220)  # delivered again
    assert _claims(store) == {110, 210, 220}
    assert store.targets.finish(TARGET, D2, TargetStatus.APPLIED, 230, trigger=Trigger.POLL)
    assert _claims(store) == frozenset()
    assert store.targets.claim(TARGET, NGINX_LATEST, D3, 300, Trigger.POLL, now=310)
    assert _claims(store) == {310}  # the moves before were recorded: not among these


def test_a_claim_that_loses_adds_nothing(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D2, 200, Trigger.POLL, now=210)
    assert not store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=220)
    assert _claims(store) == {210}


def test_a_deferral_adds_nothing(store: State) -> None:
    """A deferral's claim patches nothing, and the reconciler defers again every run."""
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=110)
    deferral = "deferred: window"
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=120, detail=deferral)
    assert _claims(store) == {110}


def test_a_hold_keeps_the_claims_it_stops_and_a_release_gives_them_back(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=110)
    assert store.targets.claim(TARGET, NGINX_LATEST, D2, 200, Trigger.POLL, now=210)
    assert store.targets.hold(TARGET, "", 250, reason="a person", trigger=Trigger.MANUAL)
    held = store.targets.get(TARGET)
    assert held is not None and held.status is TargetStatus.HELD
    assert (held.interrupted(), held.stopped_claims(), held.claims) == (210, {110, 210}, frozenset())
    assert held.interrupts(110) and held.interrupts(210) and not held.interrupts(250)
    assert store.targets.release(TARGET, 260, reason="done", trigger=Trigger.MANUAL)
    released = store.targets.get(TARGET)
    assert released is not None and released.status is TargetStatus.PENDING
    assert (released.updated_at, released.claims, released.stopped_claims()) == (210, {110, 210}, frozenset())


def test_a_settled_hold_stops_nothing_and_a_claim_after_a_lapsed_hold_starts_anew(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=110)
    assert store.targets.hold(TARGET, "", 150, reason="a person", trigger=Trigger.MANUAL, until=400)
    assert store.targets.interruption_settled(TARGET, 110)
    settled = store.targets.get(TARGET)
    assert settled is not None and settled.stopped_claims() == frozenset() and not settled.interrupts(110)
    assert store.targets.claim(TARGET, NGINX_LATEST, D2, 500, Trigger.POLL, now=510)  # the hold lapsed
    assert _claims(store) == {510}


def test_a_hold_over_an_outcome_stops_no_claim(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=110)
    assert store.targets.finish(TARGET, D1, TargetStatus.APPLIED, 120, trigger=Trigger.POLL)
    assert store.targets.hold(TARGET, "", 150, reason="a person", trigger=Trigger.MANUAL)
    held = store.targets.get(TARGET)
    assert held is not None and held.interrupted() is None and held.stopped_claims() == frozenset()
    assert store.targets.release(TARGET, 160, reason="done", trigger=Trigger.MANUAL)
    assert _claims(store) == frozenset()


def test_a_removal_ends_the_claims(store: State) -> None:
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=110)
    store.targets.remove(TARGET, 120, "unlabelled")
    assert _claims(store) == frozenset()


def test_past_the_kept_number_the_claims_too_old_to_patch_are_dropped(store: State) -> None:
    """Each claim that records nothing adds one (a consumer that dies, delivered again); the
    consumer's read of its claim drops those too old to patch once there are more than kept."""
    for i in range(CLAIMS_KEPT + 1):
        assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=1_000 + i)
    now = 1_000 + CLAIM_LIFETIME_MS + 5  # the first 6 claims are too old to patch
    assert store.targets.claim(TARGET, NGINX_LATEST, D1, 100, Trigger.POLL, now=now)
    claim = store.targets.get(TARGET)
    assert claim is not None and len(claim.claims) == CLAIMS_KEPT + 2
    forget_old_claims(store, claim, now)
    assert _claims(store) == {1_000 + i for i in range(6, CLAIMS_KEPT + 1)} | {now}
    few = store.targets.get(TARGET)
    assert few is not None
    forget_old_claims(store, few, now + CLAIM_LIFETIME_MS)  # as many as kept, or fewer: none dropped
    assert len(_claims(store)) == CLAIMS_KEPT - 4
