"""The audit trail, as the use cases see it (``tagpin.ports.state.State.history``): the steps of an
image's trail, one item of a trail, and the repository of ``HIST#`` items
(``tagpin.adapters.dynamodb.history``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import Digest, OptionalDigest


class ImageEvent(StrEnum):
    """The steps of an image's audit trail (its promotion through the waves)."""

    STARTED = "started"
    DRY_RUN_STARTED = "dry-run-started"
    DRY_RUN = "dry-run"  # the plan of a dry run
    APPLIED = "applied"  # a wave's targets were patched
    DEFERRED = "deferred"
    VERIFIED = "verified"  # a wave was verified
    WAVE_STARTED = "wave-started"
    COMPLETE = "complete"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"
    STALLED = "stalled"  # a target's rollout stayed paused longer than rollout.max_pause_seconds
    DOWNGRADED = "downgraded"  # a person moved a version channel's head down (tagpin downgrade)
    HELD = "held"  # a target was changed outside tagpin: held, not patched back
    BLOCKED = "blocked"  # a trust gate refused the digest for a target (docs/trust.md)
    UNVERIFIED = "unverified"  # rolled, although a gate in warn mode would have blocked it
    AWAITING_APPROVAL = "awaiting_approval"  # a wave waits for a person (docs/approvals.md)
    APPROVED = "approved"
    REJECTED = "rejected"
    LAPSED = "lapsed"  # nobody decided in time
    CLEARED = "cleared"  # a person cleared a version marked bad (tagpin clear)
    COMMITTED = "committed"  # a commit to Git moved targets a GitOps tool owns (docs/gitops.md)


@dataclass(frozen=True)
class HistoryEntry:
    """One item of an audit trail: a target's (``status``) or an image's (``event``)."""

    at: int
    digest: Digest | None = None
    status: str | None = None  # a TargetStatus or a TargetNote value
    event: str | None = None  # an ImageEvent value
    trigger: str | None = None
    detail: str | None = None
    previous_image: str | None = None
    correlation_id: str | None = None
    wave: str | None = None


@dataclass(frozen=True)
class ImageEventRecord:
    """One step of an image's trail, to be written: ``History.image_event``'s item as a value, for
    a write that puts it with another in one transaction (``Promotions.claim_notice``)."""

    image: FollowedKey
    digest: OptionalDigest
    event: ImageEvent
    at: int
    detail: str = ""
    wave: str | None = None
    trigger: Trigger | None = None
    correlation_id: str | None = None


class History(Protocol):
    """``HIST#`` items under a target or an image: the audit trail, expiring after the retention."""

    def record(self, recorded: ImageEventRecord) -> None:
        """One step of an image's trail, given as a value (``image_event``'s item)."""
        ...

    def image_event(
        self,
        image: FollowedKey,
        digest: OptionalDigest,
        event: ImageEvent,
        now: int,
        *,
        detail: str = "",
        wave: str | None = None,
        trigger: Trigger | None = None,
        correlation_id: str | None = None,
    ) -> None: ...

    def of_image(self, image: FollowedKey, limit: int = 100) -> list[HistoryEntry]:
        """Newest first."""
        ...

    def of_target(self, target_id: str, limit: int = 50) -> list[HistoryEntry]:
        """Newest first."""
        ...
