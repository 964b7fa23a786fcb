"""`tagpin plan`: what would roll where right now, read-only."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tagpin import wiring
from tagpin.domain.config import FollowedImage
from tagpin.domain.refs import ImageRef
from tagpin.ports.state import TagState


def _followed() -> list[FollowedImage]:
    return sorted(wiring.followed().values(), key=lambda f: f.image)


def plan(progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """What would roll where right now: the registries' answers against what the clusters run;
    for a version channel, the version its policy chooses and why the newer tags were rejected.
    Reads only; changes nothing (no state write, no enqueue, no patch)."""
    from tagpin.adapters.kubernetes.clusters import ClusterConnector

    connector = ClusterConnector(wiring.config, wiring.secret_text)
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
    held = stored is not None and stored.bad_digest == digest
    people = wiring.state().targets.get_many([t.id for t in followed.targets])
    now = int(time.time() * 1000)
    rows = []
    for target in followed.targets:
        row: dict[str, Any] = base | {"target": target.id, "digest": digest}
        if (hold := people.get(target.id)) is not None and hold.holds(digest, now):
            rows.append(row | {"action": "none", "detail": f"held: {hold.detail}"})
        else:
            bad = (stored.bad_reason or "marked bad") if held and stored is not None else None
            rows.append(_plan_target(followed, target, row, tag, bad, connector))
    return rows


def _plan_target(
    followed: FollowedImage,
    target: Any,
    row: dict[str, Any],
    tag: str | None,
    bad: str | None,
    connector: Any,
) -> dict[str, Any]:
    """One target's row: what it runs, and whether the digest would roll there. ``bad``: why the
    digest was rolled back (it is held), None when it was not."""
    from tagpin.domain.channels import pinned_source
    from tagpin.ports.workloads import WorkloadError
    from tagpin.usecases.guards import live_owner, not_live
    from tagpin.usecases.patch import pinned_image

    digest = row["digest"]
    try:
        workload = connector(target.cluster).get(target.namespace, target.kind, target.name)
    except WorkloadError as exc:
        return row | {"action": "skip", "detail": f"{type(exc).__name__}: {exc}"}
    current = workload.containers.get(target.container) or workload.init_containers.get(target.container)
    if current is None:
        return row | {"action": "error", "detail": f"no container {target.container!r}"}
    desired = pinned_image(current, pinned_source(followed.image, tag), digest)
    row = row | {"current": current, "to": desired}
    if current == desired:  # nothing to roll, so no gate to pass (the image may be gone by now)
        return row | {"action": "none"}
    if bad is not None:
        return row | {"action": "none", "detail": f"held: its rollout failed and was rolled back ({bad})"}
    gitops = wiring.config().gitops
    owner = live_owner(gitops, workload, target.id)
    written = gitops.for_target(followed.image, target.id) if owner is not None else []
    if owner is not None and not written:  # Argo CD or Flux owns it: never patched live
        return row | {"action": "none", "detail": not_live(owner)}
    if written:  # a commit moves it (docs/gitops.md); the gates below decide as for a patch
        where = ", ".join(f"{w.repository}#{w.branch}" for w in written)
        row["detail"] = f"through Git: {where} ({owner} applies it)"
    # The trust gates decide a roll only: a target already current is not checked against them.
    blocked = wiring.trust_gates().check(followed, digest, target)
    if blocked is not None and blocked.enforced:
        return row | {"action": "none", "detail": f"blocked: {blocked.gate}: {blocked.reason}"}
    if blocked is not None:
        row["detail"] = _and(row.get("detail"), f"warn: {blocked.gate}: {blocked.reason}")
    return row | {"action": "roll"}


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
