"""``Admission``: the gates in their order, asked by the live path (``decide_move``, ``decide``) and
by every "would this roll?" (``explain``: the dry run, ``tagpin plan``, the console)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from tagpin.domain.config import GitOpsSettings, RolloutSettings, Target
from tagpin.domain.moves import Move
from tagpin.ports.state import State
from tagpin.usecases.admission.approval import ApprovalGate
from tagpin.usecases.admission.bad_digest import BadDigestGate
from tagpin.usecases.admission.decision import Decision, Gate, GateName, Known, MoveGate, Stage, Verdict
from tagpin.usecases.admission.hold import HoldAnnotationGate, HoldGate
from tagpin.usecases.admission.owner import OwnerGate
from tagpin.usecases.admission.paused import PausedGate
from tagpin.usecases.admission.slot import SlotGate
from tagpin.usecases.admission.superseded import SupersededGate
from tagpin.usecases.admission.wave import WaveGate
from tagpin.usecases.admission.window import WindowGate


def first_stop(decisions: Iterable[Decision]) -> Decision:
    """The first decision that does not let the move go (an ``unknown`` one neither), carrying the
    warnings of the gates before it; else go with every warning. Lazy: no gate after the first
    stop is asked (a window that defers takes no cluster slot; a hold asks no registry). A wave's
    wait is the answer only when nothing after it stops the move: what will stop it once its wave
    comes (a hold, a missing signature) says more than "later"."""
    warnings: list[Decision] = []
    waiting: Decision | None = None
    for decision in decisions:
        if decision.verdict is Verdict.WAIT:
            waiting = waiting or decision
            continue
        if decision.goes:
            if decision.warn:
                warnings.append(decision)
            continue
        return decision.with_warnings(tuple(warnings))
    return (waiting or Decision.go()).with_warnings(tuple(warnings))


@dataclass(frozen=True)
class Unavailable:
    """A gate where what it reads cannot be read (the console reads no registry): always unknown."""

    name: GateName
    stage: Stage
    why: str

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        return Decision.unknown(self.name, self.why)


class Admission:
    """May this move start on this target now? One answer (``Decision``) from the gates in order:
    the move's gates, then each target's by stage (``Stage``), in the order given within one."""

    def __init__(self, move_gates: Sequence[MoveGate], gates: Sequence[Gate]) -> None:
        stages = [g.stage for g in gates]
        if stages != sorted(stages):
            raise ValueError("gates must be given stage by stage (WAVE, TARGET, then WORKLOAD)")
        self.move_gates = tuple(move_gates)
        self.gates = tuple(gates)

    def decide_move(self, move: Move, known: Known, now: int) -> Decision:
        """The live path, once per change: the move's gates."""
        return first_stop(g.decide(move, known, now) for g in self.move_gates)

    def decide(self, move: Move, target: Target, known: Known, now: int, stage: Stage) -> Decision:
        """The live path, for one target: the gates of ``stage``; a gate that takes something to
        let the move go takes it (the cluster slot)."""
        live = replace(known, live=True)
        return first_stop(g.decide(move, target, live, now) for g in self.gates if g.stage is stage)

    def explain(
        self, move: Move, target: Target, known: Known, now: int, *, until_stop: bool = False
    ) -> list[Decision]:
        """Every gate's decision, in order, changing nothing (no slot taken, no request sent);
        ``until_stop``: up to the first that does not let the move go (no registry is asked for a
        held target), as the live path asks them; past a wave's wait (``first_stop``)."""
        looking = replace(known, live=False)
        asked = itertools.chain(
            (g.decide(move, looking, now) for g in self.move_gates),
            (g.decide(move, target, looking, now) for g in self.gates),
        )
        decisions = []
        for decision in asked:
            decisions.append(decision)
            if until_stop and not decision.goes and decision.verdict is not Verdict.WAIT:
                break
        return decisions


def standard(
    *,
    state: State,
    settings: Callable[[], RolloutSettings],
    gitops: Callable[[], GitOpsSettings] = GitOpsSettings,
    platforms: Gate | None = None,
    signatures: Gate | None = None,
) -> Admission:
    """tagpin's gates in their order (docs: ``tagpin.usecases.admission``). Without ``platforms``
    or ``signatures`` (a stack or test without those ports) that gate is not asked."""
    trust = [gate for gate in (platforms, signatures) if gate is not None]
    return Admission(
        [SupersededGate(), BadDigestGate()],
        [
            WaveGate(settings),
            ApprovalGate(),
            HoldGate(),
            *trust,
            WindowGate(settings),
            SlotGate(state, settings),
            PausedGate(),
            HoldAnnotationGate(),
            OwnerGate(gitops),
        ],
    )
