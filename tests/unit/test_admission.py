"""Admission: each gate's decision on its own (superseded, bad digest, approval, hold and its
annotation, paused, GitOps owner, window, slot; platform and signature in tests/unit/test_trust.py),
and how ``Admission`` asks them (in order, lazily, warnings carried, explain changing nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from tagpin.domain.config import FollowedImage, GitOpsSettings, RolloutSettings, Target, Wave
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.ports.state import Promotion, PromotionStatus, State, TagState, TargetState, TargetStatus
from tagpin.ports.workloads import Workload
from tagpin.usecases.admission import (
    Admission,
    Decision,
    GateName,
    Known,
    Stage,
    Unavailable,
    Verdict,
    first_stop,
    standard,
)
from tagpin.usecases.admission.approval import ApprovalGate
from tagpin.usecases.admission.bad_digest import BadDigestGate
from tagpin.usecases.admission.hold import HoldAnnotationGate, HoldGate
from tagpin.usecases.admission.owner import OwnerGate
from tagpin.usecases.admission.paused import PausedGate
from tagpin.usecases.admission.slot import SlotGate
from tagpin.usecases.admission.superseded import SupersededGate
from tagpin.usecases.admission.wave import WaveGate
from tagpin.usecases.admission.window import WindowGate
from tagpin.usecases.waves import PlannedWave

from tests.support.constants import D0, D1, D2, WEB

NOW = 1_800_000_000_000  # Friday 2027-01-15 08:00 UTC
TARGET = Target(cluster="dev", namespace="demo", name="web", container="app")
MOVE = Move(image=WEB, digest=D1, observed_at=1_000, trigger=Trigger.POLL)
FOLLOWED = FollowedImage(image=WEB, targets=[TARGET])
ARGO = {"app.kubernetes.io/instance": "shop"}


def tag(digest: str = D1, observed_at: int = 1_000, bad: str | None = None) -> TagState:
    return TagState(
        WEB, digest, observed_at, observed_at, observed_at, bad_digest=bad and digest, bad_reason=bad
    )


def promotion(
    digest: str = D1, status: PromotionStatus = PromotionStatus.ROLLING, **more: object
) -> Promotion:
    fields: dict[str, object] = {"observed_at": 1_000, "wave": 0, "started_at": 1, "updated_at": 1} | more
    return Promotion(WEB, digest, status=status, **fields)  # type: ignore[arg-type]


def workload(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Workload:
    return Workload("1", {"app": "web"}, annotations=annotations or {}, labels=labels or {})


def verdict(decision: Decision) -> tuple[Verdict, str]:
    return decision.verdict, decision.reason


# -- the move's gates -----------------------------------------------------------------------------


def test_superseded_by_a_newer_digest_of_the_tag_or_of_the_promotion() -> None:
    gate = SupersededGate()
    assert verdict(gate.decide(MOVE, Known(tag=tag(D2, 2_000)), NOW)) == (Verdict.BLOCK, f"current: {D2}")
    assert gate.decide(MOVE, Known(tag=tag(D2, 500)), NOW).goes  # an older observation of another digest
    assert gate.decide(MOVE, Known(tag=tag(D1, 2_000)), NOW).goes  # this digest, seen again later
    newer = promotion(D2, observed_at=1_000)  # the promotion's start refuses an equal observation too
    assert verdict(gate.decide(MOVE, Known(promotion=newer), NOW)) == (Verdict.BLOCK, f"current: {D2}")
    assert gate.decide(MOVE, Known(promotion=promotion(D0, observed_at=999)), NOW).goes


def test_a_bad_digest_or_a_halted_promotion_blocks_the_move() -> None:
    gate = BadDigestGate()
    bad = gate.decide(MOVE, Known(tag=tag(bad="rolled back: ProgressDeadlineExceeded")), NOW)
    assert (bad.gate, *verdict(bad)) == (
        GateName.BAD_DIGEST,
        Verdict.BLOCK,
        "rolled back: ProgressDeadlineExceeded",
    )
    assert not bad.transient
    assert gate.decide(MOVE, Known(tag=tag(D2, bad="x")), NOW).goes  # another digest is the bad one
    halted = promotion(status=PromotionStatus.HALTED, detail="wave prod: nobody decided")
    assert verdict(gate.decide(MOVE, Known(promotion=halted), NOW)) == (
        Verdict.BLOCK,
        "wave prod: nobody decided",
    )
    assert gate.decide(MOVE, Known(promotion=promotion(D2, status=PromotionStatus.HALTED)), NOW).goes


# -- each target's gates --------------------------------------------------------------------------


def waves(approval: bool) -> tuple[FollowedImage, PlannedWave, PlannedWave]:
    stage = PlannedWave(0, "stage", Wave(name="stage", clusters=["dev"]), [TARGET])
    prod = PlannedWave(1, "prod", Wave(name="prod", clusters=["prod"], approval=approval), [TARGET])
    return FOLLOWED, stage, prod


def test_approval_waits_until_the_wave_is_approved_for_this_digest() -> None:
    gate = ApprovalGate()
    followed, stage, prod = waves(approval=True)
    ask = lambda wave, p: gate.decide(MOVE, TARGET, Known(followed, wave, promotion=p), NOW)  # noqa: E731
    waiting = ask(prod, promotion(wave=1))
    assert (waiting.gate, *verdict(waiting)) == (
        GateName.APPROVAL,
        Verdict.AWAIT_APPROVAL,
        "wave prod waits for approval",
    )
    assert ask(prod, None).verdict is Verdict.AWAIT_APPROVAL  # not started: asked when reached
    assert ask(prod, promotion(D2, wave=1, approved_waves=frozenset({1}))).verdict is Verdict.AWAIT_APPROVAL
    assert ask(prod, promotion(wave=1, approved_waves=frozenset({1}))).goes
    assert ask(prod, promotion(wave=2)).goes  # passed already
    assert ask(prod, promotion(status=PromotionStatus.COMPLETE)).goes  # healing
    assert ask(stage, promotion()).goes  # its wave needs no approval
    image_wide = FOLLOWED.model_copy(update={"approval": True})
    assert gate.decide(MOVE, TARGET, Known(image_wide, stage), NOW).verdict is Verdict.AWAIT_APPROVAL


def test_a_target_waits_until_the_promotion_reaches_its_wave() -> None:
    settings = RolloutSettings.model_validate({"soak_seconds": 600})
    gate = WaveGate(lambda: settings)
    followed, stage, prod = waves(approval=False)
    empty = PlannedWave(1, "qa", Wave(name="qa", clusters=["qa"]), [])
    last = PlannedWave(3, "rest", None, [TARGET])
    plan = (stage, empty, replace(prod, index=2), last)
    ask = lambda wave, p: gate.decide(MOVE, TARGET, Known(followed, wave, promotion=p, waves=plan), NOW)  # noqa: E731
    assert ask(stage, None).goes  # a new promotion starts at the first wave
    assert verdict(ask(last, None)) == (
        Verdict.WAIT,
        "wave rest waits for wave stage, where its promotion starts",
    )
    assert ask(last, promotion(D2, wave=3)).verdict is Verdict.WAIT  # another digest's: starts anew
    assert ask(last, promotion(status=PromotionStatus.DRY_RUN)).verdict is Verdict.WAIT
    rolling = ask(last, promotion(wave=0))
    assert (rolling.gate, *verdict(rolling)) == (
        GateName.WAVE,
        Verdict.WAIT,
        "wave rest waits for wave stage to be verified",
    )
    # an empty wave is passed over: the wave named is the next with targets
    assert ask(last, promotion(wave=1)).reason == "wave rest waits for wave prod to be verified"
    soaking = ask(last, promotion(wave=2, wave_verified_at=NOW))
    assert soaking.reason == "wave rest waits for wave prod to soak (until 2027-01-15T08:10:00Z)"
    asking = ask(last, promotion(wave=2, awaiting_wave=2))
    assert asking.reason == "wave rest waits for wave prod, which awaits a person's approval"
    assert asking.summary == f"waiting: {asking.reason}"
    assert ask(replace(prod, index=2), promotion(wave=2)).goes  # its wave is reached
    assert ask(stage, promotion(wave=2)).goes  # and every wave before it
    assert ask(last, promotion(status=PromotionStatus.COMPLETE)).goes  # a complete one heals all
    assert gate.decide(MOVE, TARGET, Known(followed), NOW).goes  # no waves known: nothing to wait for


def test_a_wave_wait_answers_only_when_nothing_else_stops_the_move() -> None:
    wait = Decision.wait("wave prod waits for wave stage to be verified")
    held_ = Decision.block(GateName.HOLD, "held by alice")
    assert first_stop([Decision.go(GateName.BAD_DIGEST), wait, Decision.go(GateName.HOLD)]) == wait
    assert first_stop([wait, held_]) == held_  # what stops it when its wave comes says more


def held(digest: str, until: int | None = None, detail: str = "held by alice via cli") -> TargetState:
    return TargetState(
        TARGET.id, WEB, D0, 1, TargetStatus.HELD, 1, detail=detail, held_digest=digest, held_until=until
    )


@pytest.mark.parametrize(
    ("state", "stops"),
    [
        (None, False),
        (held(""), True),  # a person's: against any digest
        (held(D1), True),  # tagpin's after a manual change: against this digest
        (held(D2), False),  # against another digest: the tag moved since
        (held("", until=NOW), False),  # lapsed
        (held("", until=NOW + 1), True),
    ],
)
def test_a_stored_hold(state: TargetState | None, stops: bool) -> None:
    decision = HoldGate().decide(MOVE, TARGET, Known(state=state), NOW)
    assert decision.verdict is (Verdict.BLOCK if stops else Verdict.GO)
    if stops:
        assert (
            decision.reason == "held by alice via cli" and decision.summary == "held: held by alice via cli"
        )


@pytest.mark.parametrize(
    ("gate", "annotations", "labels", "reason"),
    [
        (PausedGate(), {"tagpin.dev/paused": "true"}, {}, "annotated tagpin.dev/paused"),
        (
            HoldAnnotationGate(),
            {"tagpin.dev/hold": "true"},
            {},
            "annotated tagpin.dev/hold: held where it is",
        ),
        (
            OwnerGate(GitOpsSettings),
            {},
            ARGO,
            "managed by Argo CD Application shop (label app.kubernetes.io/instance)",
        ),
    ],
)
def test_the_workload_gates(
    gate: OwnerGate, annotations: dict[str, str], labels: dict[str, str], reason: str
) -> None:
    stopped = gate.decide(MOVE, TARGET, Known(workload=workload(annotations, labels)), NOW)
    assert stopped.verdict is Verdict.BLOCK and stopped.reason.startswith(reason) and not stopped.transient
    assert gate.decide(MOVE, TARGET, Known(workload=workload()), NOW).goes
    assert gate.decide(MOVE, TARGET, Known(workload=workload({"tagpin.dev/paused": "false"})), NOW).goes
    unread = gate.decide(MOVE, TARGET, Known(), NOW)
    assert unread.verdict is Verdict.UNKNOWN and unread.reason == "the workload is not read here"


def test_patch_live_lets_an_owned_workload_go() -> None:
    allowed = GitOpsSettings.model_validate({"patch_live": ["dev/demo/Deployment/web"]})
    assert OwnerGate(lambda: allowed).decide(MOVE, TARGET, Known(workload=workload(labels=ARGO)), NOW).goes


def test_a_closed_window_defers_until_it_opens() -> None:
    weekend = RolloutSettings.model_validate(
        {"maintenance_windows": [{"clusters": ["dev"], "days": ["sat"], "start": "02:00", "end": "04:00"}]}
    )
    deferred = WindowGate(lambda: weekend).decide(MOVE, TARGET, Known(), NOW)  # Friday 08:00
    assert (deferred.gate, deferred.verdict, deferred.wait_s) == (GateName.WINDOW, Verdict.DEFER, 18 * 3600)
    assert deferred.reason == "outside its maintenance window (next opens 2027-01-16T02:00:00Z)"
    assert deferred.summary.startswith("deferred: outside its maintenance window")
    assert WindowGate(lambda: weekend).decide(MOVE, TARGET, Known(), NOW + 19 * 3600_000).goes
    assert WindowGate(RolloutSettings).decide(MOVE, TARGET, Known(), NOW).goes  # no window covers it


def test_the_slot_is_taken_by_the_live_path_and_only_counted_by_explain(store: State) -> None:
    limited = RolloutSettings(max_concurrent_per_cluster=1, verify_interval_seconds=30)
    gate = SlotGate(store, lambda: limited)
    other = TARGET.model_copy(update={"name": "api"})
    assert gate.decide(MOVE, TARGET, Known(), NOW).goes  # explain: free, and nothing taken
    assert store.slots.holders("dev") == {}
    assert gate.decide(MOVE, TARGET, Known(live=True), NOW).goes
    assert store.slots.holders("dev") == {TARGET.id: D1}
    assert gate.decide(MOVE, TARGET, Known(), NOW).goes  # it holds the slot already
    full = gate.decide(MOVE, other, Known(), NOW)
    assert (full.verdict, full.wait_s) == (Verdict.DEFER, 30)
    assert full.reason == "cluster dev has 1 rollouts in progress (max_concurrent_per_cluster)"
    assert gate.decide(MOVE, other, Known(live=True), NOW).verdict is Verdict.DEFER
    assert store.slots.holders("dev") == {TARGET.id: D1}
    assert SlotGate(store, RolloutSettings).decide(MOVE, other, Known(live=True), NOW).goes  # no limit


# -- how admission asks them -------------------------------------------------------------------------


@dataclass
class Scripted:
    """A gate answering ``answer``, counting how often it was asked and with what."""

    name: GateName
    answer: Decision
    stage: Stage = Stage.TARGET
    asked: list[Known] = field(default_factory=list)

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        self.asked.append(known)
        return self.answer


def test_the_first_stop_decides_and_no_gate_after_it_is_asked() -> None:
    warn = Scripted(GateName.SIGNATURE, Decision.warning(GateName.SIGNATURE, "unsigned"))
    window = Scripted(GateName.WINDOW, Decision.defer(GateName.WINDOW, 60, "closed"))
    slot = Scripted(GateName.SLOT, Decision.go(GateName.SLOT))
    paused = Scripted(GateName.PAUSED, Decision.block(GateName.PAUSED, "annotated"), Stage.WORKLOAD)
    admission = Admission([], [warn, window, slot, paused])
    decision = admission.decide(MOVE, TARGET, Known(), NOW, Stage.TARGET)
    assert (decision.gate, decision.verdict, decision.wait_s) == (GateName.WINDOW, Verdict.DEFER, 60)
    assert decision.warnings == (warn.answer,)  # recorded although the target waits
    assert slot.asked == [] and paused.asked == []  # a deferred target takes no slot
    assert warn.asked[0].live  # the live path: a gate may take what it needs to let the move go
    assert admission.decide(MOVE, TARGET, Known(), NOW, Stage.WORKLOAD).gate is GateName.PAUSED


def test_explain_asks_every_gate_in_order_and_takes_nothing() -> None:
    gates = [
        Scripted(GateName.HOLD, Decision.block(GateName.HOLD, "held")),
        Scripted(GateName.WINDOW, Decision.defer(GateName.WINDOW, 5, "closed")),
        Scripted(GateName.OWNER, Decision.go(GateName.OWNER), Stage.WORKLOAD),
    ]
    decisions = Admission([SupersededGate()], gates).explain(MOVE, TARGET, Known(live=True), NOW)
    assert [d.gate for d in decisions] == [
        GateName.SUPERSEDED,
        GateName.HOLD,
        GateName.WINDOW,
        GateName.OWNER,
    ]
    assert all(not g.asked[0].live for g in gates)
    assert first_stop(decisions).gate is GateName.HOLD


def test_gates_come_stage_by_stage() -> None:
    late = Scripted(GateName.OWNER, Decision.go(), Stage.WORKLOAD)
    with pytest.raises(ValueError, match="stage by stage"):
        Admission([], [late, Scripted(GateName.HOLD, Decision.go())])


def test_an_unknown_answer_stops_the_move() -> None:
    unavailable = Unavailable(GateName.PLATFORM, Stage.TARGET, "the console reads no registry")
    decision = Admission([], [unavailable]).decide(MOVE, TARGET, Known(), NOW, Stage.TARGET)
    assert decision.verdict is Verdict.UNKNOWN
    assert decision.summary == "platform: not known here: the console reads no registry"


def test_the_standard_order(store: State) -> None:
    admission = standard(
        state=store,
        settings=RolloutSettings,
        platforms=Unavailable(GateName.PLATFORM, Stage.TARGET, "-"),
        signatures=Unavailable(GateName.SIGNATURE, Stage.TARGET, "-"),
    )
    assert [g.name for g in admission.move_gates] + [g.name for g in admission.gates] == [
        GateName.SUPERSEDED,
        GateName.BAD_DIGEST,
        GateName.WAVE,
        GateName.APPROVAL,
        GateName.HOLD,
        GateName.PLATFORM,
        GateName.SIGNATURE,
        GateName.WINDOW,
        GateName.SLOT,
        GateName.PAUSED,
        GateName.HOLD,
        GateName.OWNER,
    ]
    assert [g.name for g in standard(state=store, settings=RolloutSettings).gates][3] is GateName.WINDOW


def test_how_each_decision_reads() -> None:
    assert Decision.go().summary == "go"
    assert (
        Decision.block(GateName.SIGNATURE, "unsigned: no signature").summary
        == "blocked: signature: unsigned: no signature"
    )
    assert Decision.block(GateName.BAD_DIGEST, "").summary == "blocked: bad digest"
    assert Decision.warning(GateName.SIGNATURE, "wrong-key").summary == "warn: signature: wrong-key"
    assert (
        Decision.await_approval("wave prod waits for approval").summary
        == "awaiting approval: wave prod waits for approval"
    )
    assert Decision.block(GateName.OWNER, "managed by X").summary == "managed by X"
    assert Decision.defer(GateName.SLOT, 0, "full").wait_s == 1  # never "at once": a retry waits
