"""The one answer every gate gives (``Decision``), what a gate is asked with (``Known``), and the
two shapes of gate: one that judges the move whatever the target (``MoveGate``) and one that
judges the move on one target (``Gate``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum, StrEnum
from typing import Protocol

from tagpin.domain.config import FollowedImage, Target
from tagpin.domain.moves import Move
from tagpin.ports.state import Promotion, TagState, TargetState
from tagpin.ports.workloads import Workload
from tagpin.usecases.waves import PlannedWave


class Verdict(StrEnum):
    GO = "go"  # may start now (a gate in warn mode may have something to record: ``warn``)
    DEFER = "defer"  # not now: asked again after ``wait_s`` seconds
    BLOCK = "block"  # not this move here; ``transient``: could not be decided now, asked again
    AWAIT_APPROVAL = "await-approval"  # its wave waits for a person's decision
    WAIT = "wait"  # its wave is not reached yet: the promotion brings the move when it is
    UNKNOWN = "unknown"  # explain only: what the gate reads was not read where it was asked


class GateName(StrEnum):
    """Every gate, in the order admission asks them (``tagpin.usecases.admission``)."""

    SUPERSEDED = "superseded"
    BAD_DIGEST = "bad-digest"
    WAVE = "wave"
    APPROVAL = "approval"
    HOLD = "hold"
    PLATFORM = "platform"
    SIGNATURE = "signature"
    WINDOW = "window"
    SLOT = "slot"
    PAUSED = "paused"
    OWNER = "owner"


class Stage(IntEnum):
    """When the live path asks a gate. Explain asks every stage at once, in this order."""

    MOVE = 0  # the move as a whole, before its promotion starts
    WAVE = 1  # a target's wave, in the promotion's plan: asked before anything of the target is read
    TARGET = 2  # a target, before it is claimed: the state, the configuration, the registry, the clock
    WORKLOAD = 3  # a target's workload as the patch step reads it (again at every conflict retry)


# How a stop reads in ``tagpin plan``, the dry run and the console: "<label>: <reason>". A gate not
# named here reads as its verdict says: "blocked: <gate>", "deferred", "awaiting approval".
_LABELS: dict[GateName, str] = {
    GateName.SUPERSEDED: "superseded",
    GateName.BAD_DIGEST: "blocked: bad digest",
    GateName.HOLD: "held",
    GateName.PAUSED: "paused",
    GateName.OWNER: "",  # its reason says it all ("managed by Argo CD Application shop ...")
}


@dataclass(frozen=True)
class Decision:
    """A gate's answer for one move on one target (or the move as a whole: ``MoveGate``)."""

    gate: GateName | None  # None: every gate asked let it go
    verdict: Verdict
    reason: str = ""
    wait_s: int = 0  # DEFER: seconds until it may be tried again
    transient: bool = False  # BLOCK or a warning: the answer could not be had (a registry error)
    warn: bool = False  # GO from a gate in warn mode that would block: ``reason`` is recorded
    # ``Admission.decide``: the warnings of the gates asked before this answer (recorded, announced)
    warnings: tuple[Decision, ...] = field(default=(), compare=False)

    @classmethod
    def go(cls, gate: GateName | None = None) -> Decision:
        return cls(gate, Verdict.GO)

    @classmethod
    def warning(cls, gate: GateName, reason: str, *, transient: bool = False) -> Decision:
        return cls(gate, Verdict.GO, reason, transient=transient, warn=True)

    @classmethod
    def defer(cls, gate: GateName, wait_s: int, reason: str) -> Decision:
        return cls(gate, Verdict.DEFER, reason, wait_s=max(1, wait_s))

    @classmethod
    def block(cls, gate: GateName, reason: str, *, transient: bool = False) -> Decision:
        return cls(gate, Verdict.BLOCK, reason, transient=transient)

    @classmethod
    def await_approval(cls, reason: str) -> Decision:
        return cls(GateName.APPROVAL, Verdict.AWAIT_APPROVAL, reason)

    @classmethod
    def wait(cls, reason: str) -> Decision:
        return cls(GateName.WAVE, Verdict.WAIT, reason)

    @classmethod
    def unknown(cls, gate: GateName, reason: str) -> Decision:
        return cls(gate, Verdict.UNKNOWN, reason)

    @property
    def goes(self) -> bool:
        return self.verdict is Verdict.GO

    def with_warnings(self, warnings: tuple[Decision, ...]) -> Decision:
        return replace(self, warnings=warnings) if warnings else self

    @property
    def summary(self) -> str:
        """One line for a person: ``held: held by alice``, ``blocked: signature: unsigned``,
        ``deferred: outside its maintenance window (...)``, ``warn: signature: ...``, ``go``."""
        if self.gate is None:
            return "go"
        if self.verdict is Verdict.GO:
            return f"warn: {self.gate}: {self.reason}" if self.warn else f"{self.gate}: go"
        if self.verdict is Verdict.UNKNOWN:
            return f"{self.gate}: not known here: {self.reason}"
        label = _LABELS.get(self.gate)
        if label is None:
            by_verdict = {
                Verdict.DEFER: "deferred",
                Verdict.AWAIT_APPROVAL: "awaiting approval",
                Verdict.WAIT: "waiting",
            }
            label = by_verdict.get(self.verdict, f"blocked: {self.gate}")
        return ": ".join(part for part in (label, self.reason) if part)


@dataclass(frozen=True)
class Known:
    """What is known of the move's surroundings when a gate is asked; None: not read (yet). A gate
    decides on what is known: one whose input is missing answers ``unknown`` (explain), and the live
    path asks each stage only once its input is read."""

    followed: FollowedImage | None = None
    wave: PlannedWave | None = None  # the target's wave in the image's plan
    tag: TagState | None = None  # the followed tag's state
    state: TargetState | None = None  # the target's state
    promotion: Promotion | None = None  # the image's promotion (of this digest, or of another)
    workload: Workload | None = None  # the target's workload, as read
    waves: tuple[PlannedWave, ...] = ()  # the image's plan, every wave (names where a move waits)
    # The live path (``Admission.decide``): a gate that takes something to let the move go takes it
    # (the cluster slot). Explain only looks, and changes nothing.
    live: bool = False


class MoveGate(Protocol):
    """A gate that judges the move whatever the target (asked once per change by the live path)."""

    @property
    def name(self) -> GateName: ...

    def decide(self, move: Move, known: Known, now: int) -> Decision: ...


class Gate(Protocol):
    """A gate that judges the move on one target."""

    @property
    def name(self) -> GateName: ...

    @property
    def stage(self) -> Stage: ...

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision: ...
