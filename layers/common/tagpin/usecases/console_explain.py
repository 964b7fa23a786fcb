"""The console's "would it start now?" for a target: admission's ``explain`` for the digest its tag
points to, with what the console reads (the state, the configuration, the clock). The gates that
read a registry or the workload answer ``unknown`` there; ``tagpin plan`` asks them all."""

from __future__ import annotations

from collections.abc import Mapping

from tagpin.domain.config import FollowedImage, RolloutSettings, Target
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest
from tagpin.ports.state import State, TagState, TargetState
from tagpin.usecases.admission import Admission, Decision, Known, Verdict
from tagpin.usecases.console_views import AdmissionView, GateView
from tagpin.usecases.waves import plan


def admission_view(
    admission: Admission,
    state: State,
    settings: RolloutSettings,
    followed: FollowedImage,
    target: Target,
    tag: TagState | None,
    targets: Mapping[str, TargetState],
    now: int,
) -> AdmissionView | None:
    """``targets``: the target's state, read already. None while the tag has no digest yet."""
    if tag is None or not tag.digest:
        return None
    promotion = state.promotions.get(followed.image)
    move = Move(
        image=followed.image,
        digest=Digest(tag.digest),
        observed_at=tag.observed_at,
        trigger=Trigger.MANUAL,
        changed_at=tag.changed_at,
        tag=tag.version,
    )
    waves = plan(settings, list(followed.targets))
    wave = next(w for w in waves if any(t.id == target.id for t in w.targets))
    known = Known(followed, wave, tag, targets.get(target.id), promotion, waves=tuple(waves))
    decisions = admission.explain(move, target, known, now)
    stops = [d for d in decisions if not d.goes and d.verdict is not Verdict.UNKNOWN]
    # a wave's wait only when nothing else stops it (as ``first_stop`` answers for tagpin plan)
    stop = next((d for d in stops if d.verdict is not Verdict.WAIT), stops[0] if stops else None)
    unknown = sorted({str(d.gate) for d in decisions if d.verdict is Verdict.UNKNOWN})
    if stop is not None:
        answer = f"would not start now: {stop.summary}"
    elif unknown:
        answer = f"no gate the console can ask stops it (not asked here: {', '.join(unknown)})"
    else:
        answer = "would start now"
    gates = [GateView(str(d.gate), d.verdict.value, _why(d)) for d in decisions]
    return AdmissionView(tag.digest, answer, gates)


def _why(decision: Decision) -> str:
    """The reason beside a gate's name: none for a plain go, the reason alone for an unknown."""
    if decision.verdict is Verdict.UNKNOWN:
        return decision.reason
    return decision.summary if not decision.goes or decision.warn else ""
