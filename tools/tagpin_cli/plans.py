"""`tagpin plan`: what would roll where right now, read-only."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tagpin import wiring
from tagpin.domain.config import FollowedImage
from tagpin.domain.refs import ImageRef
from tagpin.ports.state import TagState

if TYPE_CHECKING:
    from tagpin.usecases.explain import TargetPlan


def _followed() -> list[FollowedImage]:
    return sorted(wiring.followed().values(), key=lambda f: f.image)


def plan(progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """What would roll where right now: the registries' answers against what the clusters run;
    for a version channel, the version its policy chooses and why the newer tags were rejected.
    Reads only; changes nothing (no state write, no enqueue, no patch)."""
    connector = wiring.cluster_connector()
    rows: list[dict[str, Any]] = []
    for image in _followed():
        if progress:
            progress(image.image)
        rows.extend(_plan_image(image, connector))
    return rows


def _plan_image(followed: FollowedImage, connector: Any) -> list[dict[str, Any]]:
    base: dict[str, Any] = {"image": followed.image}
    stored = wiring.state().tags.get(followed.image)
    tag: str | None = None
    kept: TagState | None = None  # a channel's head that stays: its state (see _digest_of)
    try:
        if followed.policy is not None:
            head = wiring.channels().heads([followed]).get(followed.image)
            base["policy"] = followed.policy.text
            if head is not None and head.selection is not None:
                base["rejected"] = [f"{r.tag}: {r.reason}" for r in head.selection.rejected[:10]]
            if head is None or head.error is not None or head.ref is None:
                why = head.error if head is not None and head.error else "no version the policy allows"
                return [base | {"target": t.id, "action": "none", "detail": why} for t in followed.targets]
            tag, ref = head.tag, head.ref
            base["version"] = tag
            if head.kept:
                base["detail"], kept = head.kept, stored
        else:
            ref = followed.ref
        digest = _digest_of(ref, kept)
    except Exception as exc:  # why a head stays is kept beside the registry's answer
        return [
            base
            | {"target": t.id, "action": "unknown", "detail": _and(base.get("detail"), f"registry: {exc}")}
            for t in followed.targets
        ]
    return _plan_targets(followed, base, digest, tag, stored, connector)


def _plan_targets(
    followed: FollowedImage,
    base: dict[str, Any],
    digest: str,
    tag: str | None,
    stored: TagState | None,
    connector: Any,
) -> list[dict[str, Any]]:
    """Each target's row: admission's answer (``explain``: every gate, nothing changed), as the
    consumer would decide now, on the workload as read."""
    from tagpin.domain.messages import Trigger
    from tagpin.domain.moves import Move
    from tagpin.domain.refs import Digest
    from tagpin.usecases.admission import Known
    from tagpin.usecases.explain import explain_target
    from tagpin.usecases.waves import plan as plan_waves

    state = wiring.state()
    now = int(time.time() * 1000)
    move = Move(image=followed.image, digest=Digest(digest), observed_at=now, trigger=Trigger.MANUAL, tag=tag)
    states = state.targets.get_many([t.id for t in followed.targets])
    promotion = state.promotions.get(followed.image)
    waves = plan_waves(wiring.rollout_settings(), list(followed.targets))
    wave_of = {t.id: w for w in waves for t in w.targets}
    rows = []
    for target in followed.targets:
        known = Known(
            followed, wave_of[target.id], stored, states.get(target.id), promotion, waves=tuple(waves)
        )
        found = explain_target(wiring.admission(), move, target, known, now, connector)
        rows.append(_row(base | {"target": target.id, "digest": digest}, found))
    return rows


def _row(row: dict[str, Any], found: TargetPlan) -> dict[str, Any]:
    """One target's row: what it runs, and whether the digest would roll there (and if not, the
    first gate that stops it; ``wait``: its wave is not reached yet, and which wave it waits for)."""
    from tagpin.usecases.admission import Verdict

    if found.unreadable:
        return row | {"action": "skip", "detail": found.error}
    if found.current is not None:
        row = row | {"current": found.current, "to": found.desired}
    if not found.decision.goes:
        action = "wait" if found.decision.verdict is Verdict.WAIT else "none"
        return row | {"action": action, "detail": found.decision.summary}
    if found.error is not None:
        return row | {"action": "error", "detail": found.error}
    for warning in found.decision.warnings:
        row["detail"] = _and(row.get("detail"), warning.summary)
    for note in found.decisions:  # a go that says how (the owner gate: "through Git: ...")
        if note.goes and note.reason and not note.warn:
            row["detail"] = _and(row.get("detail"), note.reason)
    return row | {"action": "roll" if found.rolls else "none"}


def _and(first: str | None, then: str) -> str:
    return then if first is None else f"{first}; {then}"


def _digest_of(ref: ImageRef, kept: TagState | None) -> str:
    """The digest ``ref`` points to now. A channel's head that stays (``kept``: its state) although
    its tag was deleted from the registry stays at the digest recorded for it."""
    from tagpin.ports.registry import ManifestNotFound

    try:
        return wiring.registry_client().resolve(ref).digest
    except ManifestNotFound:
        if kept is None or kept.version != ref.tag or not kept.digest:
            raise
        return kept.digest
