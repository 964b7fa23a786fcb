"""The values the console's views show (rows, pages, timelines, promotions wave by wave) and how a
target's state and its tag read as one condition. Plain frozen values: the renderer escapes every
string in them (they may come from a registry, a cluster or a notification)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from tagpin.domain.channels import FollowedKey, pinned_source
from tagpin.domain.config import FollowedImage, Target
from tagpin.domain.refs import Digest
from tagpin.ports.state import HistoryEntry, TagState, TargetState, TargetStatus

# A target in one of these states shows it, with its detail (the reason), whatever its tag says.
SHOWN = frozenset(
    {TargetStatus.FAILED, TargetStatus.GONE, TargetStatus.HELD, TargetStatus.STALLED, TargetStatus.OWNED}
)


class Condition:
    """A target against its tag: what the console and ``tagpin status`` show."""

    CURRENT = "current"  # settled at the tag's digest
    BEHIND = "behind"
    PENDING = "pending"  # being applied
    FAILED = "failed"
    GONE = "gone"
    HELD = "held"  # a person's hold, or tagpin's after a person's change: with its reason
    STALLED = "stalled"  # its rollout stayed paused too long: no longer followed
    OWNED = "owned"  # Argo CD or Flux owns it: not patched live (docs/gitops.md)
    UNKNOWN = "unknown"  # nothing recorded yet


def condition(state: TargetState | None, tag: TagState | None) -> str:
    if state is None:
        return Condition.UNKNOWN
    if state.status in SHOWN:
        return state.status.value
    if tag is not None and state.settled_at(tag.digest):
        return Condition.CURRENT
    if state.status is TargetStatus.PENDING:
        return Condition.PENDING
    return Condition.BEHIND


# -- the values the views show ------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRow:
    image: FollowedKey
    source: str  # configuration, or label (discovered by the reconciler)
    targets: int
    policy: str | None = None  # a version channel's policy
    version: str | None = None  # its head
    digest: Digest | None = None
    resolved_at: int | None = None
    changed_at: int | None = None
    error: str | None = None  # the registry's last error (kept with the working digest)
    error_at: int | None = None
    blocked: str | None = None  # the digest failed and was rolled back: why


@dataclass(frozen=True)
class TargetRow:
    target_id: str
    image: FollowedKey
    source: str
    condition: str
    desired: str | None = None  # what the tag says it should run: <image or version>@<digest>
    running: str | None = None  # the digest tagpin last applied (or is applying)
    status: str | None = None
    detail: str | None = None  # the last outcome's detail, or a hold's reason
    updated_at: int | None = None
    held_until: int | None = None
    held_digest: str | None = None  # a hold against one digest (tagpin's); None or "" any digest


@dataclass(frozen=True)
class Page[T]:
    rows: list[T]
    next: str | None  # the cursor of the next page; None on the last
    first: bool  # the first page


@dataclass(frozen=True)
class Event:
    """One step of a timeline (newest first): a target's outcome or an image's promotion step."""

    at: int
    what: str
    digest: Digest | None = None
    trigger: str | None = None
    detail: str | None = None
    previous_image: str | None = None
    wave: str | None = None


@dataclass(frozen=True)
class WaveView:
    """A wave of an image's promotion: where it stands (``done``, ``rolling``, ``soaking`` until
    ``soak_ends_at``, ``awaiting-approval``, ``waiting``, ``halted``, ``dry-run``)."""

    name: str
    targets: int
    stage: str
    soak_ends_at: int | None = None


@dataclass(frozen=True)
class PromotionView:
    digest: Digest
    status: str
    version: str | None
    started_at: int
    waves: list[WaveView]
    detail: str | None = None


@dataclass(frozen=True)
class ImageView:
    row: ImageRow
    targets: list[TargetRow]
    timeline: list[Event]
    promotion: PromotionView | None = None


@dataclass(frozen=True)
class GateView:
    """One gate's decision for the tag's digest on a target (``Admission.explain``)."""

    gate: str
    verdict: str  # go, defer, block, await-approval, unknown (not read by the console)
    why: str  # the reason (empty for a plain go)


@dataclass(frozen=True)
class AdmissionView:
    """Would the tag's digest start on the target now: every gate in admission's order, and the
    answer (the first that stops it, among those the console can ask)."""

    digest: Digest
    answer: str
    gates: list[GateView]


@dataclass(frozen=True)
class TargetView:
    row: TargetRow
    timeline: list[Event]
    admission: AdmissionView | None = None


@dataclass(frozen=True)
class PendingApproval:
    """A wave of an image's promotion waiting for a person (approve or reject ``digest``)."""

    image: FollowedKey
    digest: Digest
    wave: str
    version: str | None
    since: int
    expires_at: int | None


def image_path(image: FollowedKey) -> str:
    return "/console/image?" + urlencode({"ref": image})


def target_path(target_id: str, image: FollowedKey | None = None) -> str:
    query = {"id": target_id} | ({"image": image} if image else {})
    return "/console/target?" + urlencode(query)


def target_row(
    followed: FollowedImage, target: Target, state: TargetState | None, tag: TagState | None, source: str
) -> TargetRow:
    desired = None
    if tag is not None and tag.digest:
        try:
            desired = f"{pinned_source(followed.image, tag.version)}@{tag.digest}"
        except ValueError:
            desired = tag.digest
    return TargetRow(
        target_id=target.id,
        image=followed.image,
        source=source,
        condition=condition(state, tag),
        desired=desired,
        running=state.digest or None if state else None,
        status=state.status.value if state else None,
        detail=state.detail if state else None,
        updated_at=state.updated_at if state else None,
        held_until=state.held_until if state else None,
        held_digest=state.held_digest if state else None,
    )


def event_of(entry: HistoryEntry, what: str | None) -> Event:
    return Event(
        at=entry.at,
        what=what or "",
        digest=entry.digest,
        trigger=entry.trigger,
        detail=entry.detail,
        previous_image=entry.previous_image,
        wave=entry.wave,
    )
