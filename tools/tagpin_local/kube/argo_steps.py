"""What the Argo Rollouts stand-in (:mod:`.argo`) decides for one Rollout: a pure function of the
Rollout and its ReplicaSets, as read, and the clock.

It follows Argo Rollouts' controller (v1.8, rollout/canary.go, rollout/sync.go) for the cases tagpin
handles, with a basic canary (no traffic routing) as the model:

- One ReplicaSet per pod template, ``<rollout>-<hash>``, labelled ``rollouts-pod-template-hash``,
  owned by the Rollout; the real replicaset controller makes its pods, kwok makes them Ready or not.
- The first template (no ``stableRS``) and a template equal to the stable one skip the steps: the
  ReplicaSet is scaled to ``spec.replicas``; once all are available the phase is ``Healthy`` and
  ``stableRS == currentPodHash``.
- A new template walks ``spec.strategy.canary.steps`` from the first: ``setWeight`` scales the
  canary to ``ceil(replicas * weight / 100)`` and moves on once those pods are available (the
  stable ReplicaSet gives up as many pods as the canary has available); ``pause`` sets the phase
  ``Paused`` with a ``CanaryPauseStep`` pause condition and ``controllerPause``, until its
  ``duration`` passed or a person promoted it (``kubectl argo rollouts promote`` clears
  ``status.pauseConditions``); other steps (analysis, experiments, traffic) are passed over. After
  the last step the canary is scaled up whole, becomes ``stableRS``, and the old ReplicaSets are
  scaled to 0 (Argo waits ``scaleDownDelaySeconds`` with traffic routing; not here).
- Blue-green: like a canary without steps, or with one pause (reason ``BlueGreenPause``) when
  ``autoPromotionEnabled`` is false. No preview or active Services are touched.
- No progress for ``spec.progressDeadlineSeconds`` (600 by default; a pause does not count): phase
  ``Degraded``, ``ProgressDeadlineExceeded``; the canary stays as it is and the stable pods keep
  serving (``progressDeadlineAbort`` is not simulated).
- ``status.abort`` (``kubectl argo rollouts abort``): the canary is scaled to 0, the stable back to
  ``spec.replicas``, phase ``Degraded`` with ``RolloutAborted``, until the template changes again.
- ``status.conditions`` are written as ``SetRolloutCondition`` writes them: an unchanged
  condition keeps its ``lastUpdateTime`` (so a ``Degraded`` phase can be dated).
- ``status.observedGeneration`` is a string, as Argo writes it; the Rollout's
  ``rollout.argoproj.io/revision`` annotation counts its templates.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

type Obj = dict[str, Any]

HASH_LABEL = "rollouts-pod-template-hash"
REVISION = "rollout.argoproj.io/revision"
DEFAULT_DEADLINE_S = 600
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery's rand.SafeEncodeString alphabet


def template_hash(template: Obj) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(_SAFE[b % len(_SAFE)] for b in digest[:10])


def timestamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(value: Any) -> float:
    """A pause duration: an integer of seconds or a string ``30s``/``1m``/``1h``."""
    if isinstance(value, int | float):
        return float(value)
    found = re.fullmatch(r"(\d+)([smh]?)", str(value).strip())
    if found is None:
        return 0.0
    return float(found[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[found[2]]


def _parse_time(text: Any) -> float | None:
    try:
        return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


@dataclass
class Progress:
    """When a rollout last made progress (in memory, as Argo keeps it in a condition's time)."""

    mark: tuple[Any, ...] = ()
    since: float = 0.0


@dataclass
class Decision:
    """What to do: a ReplicaSet to create (``create``: its template hash, with ``create_replicas``),
    ReplicaSets to scale (name -> replicas), the status to write, the revision annotation, and when
    to look again (seconds from now; None: on the next event)."""

    create: str | None = None
    create_replicas: int = 0
    scale: dict[str, int] = field(default_factory=dict)
    status: Obj = field(default_factory=dict)
    revision: str | None = None
    again_in: float | None = None


@dataclass
class _Walk:
    """Where a rollout stands while :func:`decide` works it out."""

    replicas: int
    index: int
    pause_conditions: list[Obj]
    controller_pause: bool
    canary_ok: int
    phase: str = "Progressing"
    message: str = "more replicas need to be updated"
    canary_want: int = 0
    stable_want: int = 0
    promoted: bool = False
    again_in: float | None = None


def _available(rs: Obj | None) -> int:
    return int(((rs or {}).get("status") or {}).get("availableReplicas") or 0) if rs else 0


def _steps(spec: Obj) -> tuple[list[Obj], str]:
    strategy = spec.get("strategy") or {}
    if "blueGreen" in strategy:
        manual = (strategy.get("blueGreen") or {}).get("autoPromotionEnabled") is False
        return ([{"pause": {}}] if manual else []), "BlueGreenPause"
    return list(((strategy.get("canary") or {}).get("steps")) or []), "CanaryPauseStep"


def _condition(kind: str, status: str, reason: str, message: str, now: float) -> Obj:
    at = timestamp(now)
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": at,
        "lastTransitionTime": at,
    }


def _walk_steps(walk: _Walk, steps: list[Obj], pause_reason: str, now: float) -> None:
    """Steps from ``walk.index``: on to the first one not done (or past the last: ``promoted``).
    The canary keeps the weight the last ``setWeight`` before ``walk.index`` gave it (Argo's
    ``GetCurrentSetWeight``): a pause holds the canary at its weight, not at 0."""
    for done in steps[: walk.index]:
        if "setWeight" in (done or {}):
            walk.canary_want = math.ceil(walk.replicas * int(done["setWeight"]) / 100)
    while walk.index < len(steps):
        step = steps[walk.index] or {}
        if "setWeight" in step:
            walk.canary_want = math.ceil(walk.replicas * int(step["setWeight"]) / 100)
            if walk.canary_ok < walk.canary_want:
                return
        elif "pause" in step:
            if walk.controller_pause and not walk.pause_conditions:  # a person promoted it
                walk.controller_pause = False
                walk.index += 1
                continue
            first = walk.pause_conditions[0] if walk.pause_conditions else {}
            start, duration = _parse_time(first.get("startTime")), (step.get("pause") or {}).get("duration")
            if duration is not None and start is not None and now >= start + _seconds(duration):
                walk.pause_conditions, walk.controller_pause = [], False
                walk.index += 1
                continue
            if not walk.pause_conditions:
                walk.pause_conditions, start = [{"reason": pause_reason, "startTime": timestamp(now)}], now
            walk.controller_pause, walk.phase, walk.message = True, "Paused", pause_reason
            if duration is not None and start is not None:
                walk.again_in = max(0.1, start + _seconds(duration) - now)
            return
        walk.index += 1  # a step done, or one not simulated (analysis, experiment, traffic)
    walk.promoted = True


def _kept(found: list[Obj], before: Any) -> list[Obj]:
    """The conditions as Argo's ``SetRolloutCondition`` (utils/conditions/conditions.go) writes
    them over ``before``: one whose status and reason are unchanged is left as it was (its times and
    message: how old a failure is can be read from it); one whose status is unchanged keeps its
    ``lastTransitionTime``."""
    was = {c.get("type"): c for c in before or [] if isinstance(c, dict)}
    kept: list[Obj] = []
    for new in found:
        old = was.get(new["type"])
        if old is None or old.get("status") != new["status"]:
            kept.append(new)
        elif old.get("reason") == new["reason"]:
            kept.append(old)
        else:
            kept.append({**new, "lastTransitionTime": old.get("lastTransitionTime")})
    return kept


def _conditions(walk: _Walk, available: int, now: float) -> list[Obj]:
    if walk.phase == "Healthy":
        found = [
            _condition("Progressing", "True", "NewReplicaSetAvailable", "Rollout is healthy", now),
            _condition("Healthy", "True", "RolloutHealthy", "Rollout is healthy", now),
            _condition("Completed", "True", "RolloutCompleted", "Rollout completed update", now),
        ]
    elif walk.phase == "Paused":
        found = [_condition("Paused", "True", "RolloutPaused", "Rollout is paused", now)]
    elif walk.phase == "Progressing":
        found = [_condition("Progressing", "True", "ReplicaSetUpdated", walk.message, now)]
    elif walk.message.startswith("ProgressDeadlineExceeded"):
        reason, _, message = walk.message.partition(": ")
        found = [_condition("Progressing", "False", reason, message, now)]
    else:
        found = [_condition("Progressing", "False", "RolloutAborted", walk.message, now)]
    ok = available >= walk.replicas
    found.append(
        _condition(
            "Available",
            "True" if ok else "False",
            "AvailableReason",
            "Rollout has minimum availability" if ok else "Rollout is not available",
            now,
        )
    )
    return found


def _deadline(walk: _Walk, progress: Progress, key: tuple[Any, ...], now: float, deadline: int) -> None:
    """No progress for ``deadline`` seconds (a pause does not count): Degraded. The canary stays as
    it is and the stable pods keep serving."""
    mark = (*key, walk.index, walk.canary_ok, walk.phase)
    if mark != progress.mark:
        progress.mark, progress.since = mark, now
    if walk.phase != "Progressing":
        return
    if now - progress.since >= deadline:
        walk.phase, walk.message = "Degraded", "ProgressDeadlineExceeded"
    else:
        walk.again_in = progress.since + deadline - now


def _promote(walk: _Walk, others: list[Obj]) -> bool:
    """Past the last step: the new ReplicaSet scales up whole, then the others go; True once it
    is the stable one (all its pods available, no other pod left)."""
    walk.canary_want = walk.replicas
    walk.stable_want = max(0, walk.replicas - walk.canary_ok)
    others_gone = all(
        int((rs.get("spec") or {}).get("replicas") or 0) == 0
        and int((rs.get("status") or {}).get("replicas") or 0) == 0
        for rs in others
    )
    if walk.canary_ok >= walk.replicas and others_gone:
        walk.phase, walk.message = "Healthy", ""
        return True
    return False


def _counts(sets: list[Obj], canary: Obj | None) -> Obj:
    counts = [(rs.get("status") or {}) for rs in sets]
    replicas = sum(int(c.get("replicas") or 0) for c in counts)
    return {
        "replicas": replicas,
        "HPAReplicas": replicas,
        "updatedReplicas": int(((canary or {}).get("status") or {}).get("replicas") or 0),
        "readyReplicas": sum(int(c.get("readyReplicas") or 0) for c in counts),
        "availableReplicas": sum(_available(rs) for rs in sets),
    }


def decide(rollout: Obj, sets: list[Obj], now: float, progress: Progress) -> Decision:
    """The decision for ``rollout`` given the ReplicaSets it owns (``progress`` is updated)."""
    meta, spec = rollout.get("metadata") or {}, rollout.get("spec") or {}
    old: Obj = dict(rollout.get("status") or {})
    current = template_hash(spec.get("template") or {})
    steps, pause_reason = _steps(spec)
    by_hash = {(rs["metadata"].get("labels") or {}).get(HASH_LABEL): rs for rs in sets}
    decision = Decision(create=None if current in by_hash else current)
    revision = int((meta.get("annotations") or {}).get(REVISION) or 0)
    fresh = old.get("currentPodHash") != current  # a new template: its steps start again
    if fresh or revision == 0:
        revision += 1
        decision.revision = str(revision)
    stable = old.get("stableRS")
    canary_rs = by_hash.get(current)
    walk = _Walk(
        replicas=int(spec.get("replicas", 1)),
        index=0 if fresh else int(old.get("currentStepIndex") or 0),
        pause_conditions=[] if fresh else list(old.get("pauseConditions") or []),
        controller_pause=bool(old.get("controllerPause")) and not fresh,
        canary_ok=_available(canary_rs),
    )
    status: Obj = {"observedGeneration": str(meta.get("generation", 1)), "currentPodHash": current}
    selector = ((spec.get("selector") or {}).get("matchLabels")) or {}
    status["selector"] = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    if stable:
        status["stableRS"] = stable
    if not stable or stable == current:  # the first template, or back to the stable one: no steps
        walk.promoted, walk.index = True, len(steps)
    elif old.get("abort") and not fresh:
        walk.phase = "Degraded"
        walk.message = f"RolloutAborted: Rollout aborted update to revision {revision}"
        status.update(abort=True, abortedAt=old.get("abortedAt") or timestamp(now))
    else:
        _walk_steps(walk, steps, pause_reason, now)
    walk.stable_want = walk.replicas - min(walk.canary_ok, walk.canary_want)
    if walk.promoted and _promote(walk, [rs for h, rs in by_hash.items() if h != current]):
        status["stableRS"] = current
    _deadline(
        walk,
        progress,
        (meta.get("uid"), current),
        now,
        int(spec.get("progressDeadlineSeconds") or DEFAULT_DEADLINE_S),
    )
    timed_out = str(old.get("message") or "").startswith("ProgressDeadlineExceeded")
    if walk.phase == "Progressing" and old.get("phase") == "Degraded" and timed_out and not fresh:
        walk.phase, walk.message = "Degraded", "ProgressDeadlineExceeded"  # so until the template changes
    if walk.message == "ProgressDeadlineExceeded":
        replica_set = f"{meta.get('name', '')}-{current}"
        walk.message = f'ProgressDeadlineExceeded: ReplicaSet "{replica_set}" has timed out progressing.'
    decision.again_in = walk.again_in
    decision.create_replicas = walk.canary_want
    for h, rs in by_hash.items():
        want = walk.canary_want if h == current else walk.stable_want if h == stable else 0
        if int((rs.get("spec") or {}).get("replicas") or 0) != want:
            decision.scale[rs["metadata"]["name"]] = want
    status.update(_counts(sets, canary_rs), phase=walk.phase, message=walk.message)
    status["conditions"] = _kept(_conditions(walk, status["availableReplicas"], now), old.get("conditions"))
    if steps:
        status["currentStepIndex"] = walk.index
    if walk.phase == "Paused":
        status.update(pauseConditions=walk.pause_conditions, controllerPause=walk.controller_pause)
    decision.status = status
    return decision


def same_status(a: Obj, b: Obj) -> bool:
    """Equal but for the conditions' times (a write only when something changed)."""

    def strip(status: Obj) -> Obj:
        out = dict(status)
        out["conditions"] = [
            {k: v for k, v in c.items() if k not in ("lastUpdateTime", "lastTransitionTime")}
            for c in status.get("conditions") or []
        ]
        return out

    return strip(a) == strip(b)
