"""The promotion of a tag's newest digest through the waves, as the use cases see it
(``tagpin.ports.state.State.promotions``): ``ROLLOUT#<image>`` items, kept by
``tagpin.adapters.dynamodb.promotions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import Digest
from tagpin.ports.history import ImageEventRecord


class PromotionStatus(StrEnum):
    ROLLING = "rolling"  # the active wave is being applied, verified or soaked
    COMPLETE = "complete"  # every wave verified
    HALTED = "halted"  # a target failed: the digest is bad, nothing more is promoted
    DRY_RUN = "dry_run"  # the plan was recorded, nothing patched


@dataclass(frozen=True)
class Promotion:
    image: FollowedKey
    digest: Digest
    observed_at: int
    wave: int
    status: PromotionStatus
    started_at: int
    updated_at: int
    wave_verified_at: int | None = None
    trigger: Trigger | None = None
    correlation_id: str | None = None
    detail: str | None = None
    started: bool = False  # this call created it (a new digest, or a new promotion of it)
    tag: str | None = None  # a version channel's: the version being promoted
    awaiting_wave: int | None = None  # the wave waiting for a person's approval (awaiting_approval)
    approval_expires_at: int | None = None  # when that request lapses (epoch ms)
    # the change that asked (``usecases.approvals.asker``): its own redelivery sends the expire again
    approval_asked_by: str | None = None
    approved_waves: frozenset[int] = frozenset()  # the waves a person approved for this digest

    @property
    def awaiting_approval(self) -> bool:
        return self.status is PromotionStatus.ROLLING and self.awaiting_wave is not None


class Promotions(Protocol):
    """``ROLLOUT#<image>``: the promotion of a tag's newest digest through the waves."""

    def start(
        self,
        image: FollowedKey,
        digest: Digest,
        observed_at: int,
        now: int,
        *,
        trigger: Trigger,
        correlation_id: str | None,
        dry_run: bool,
        event: ImageEventRecord,
        tag: str | None = None,
    ) -> Promotion | None:
        """The promotion of ``digest`` (started here when it is newer than the stored one); None
        when a newer digest holds the tag's promotion. ``tag``: a version channel's version.
        ``event``: the image's history item of the start, written with it (both or neither)."""
        ...

    def get(self, image: FollowedKey) -> Promotion | None: ...

    def wave_verified(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        now: int,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        """Every target of the active wave is verified: start its soak (once)."""
        ...

    def advance(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        now: int,
        to: int | None = None,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        """Move from the verified, soaked ``wave`` to wave ``to`` (default: the next one); exactly
        one caller wins. ``event`` (here and in every step below): the image's history item of the
        step, written with it or not at all, as ``end``'s."""
        ...

    def end(
        self,
        image: FollowedKey,
        digest: Digest,
        status: PromotionStatus,
        now: int,
        detail: str,
        *,
        event: ImageEventRecord,
    ) -> bool:
        """Complete or halt a rolling promotion (exactly one caller wins). ``event``: the image's
        history item of the end, written with it or not at all (a process that dies between the two
        would leave the promotion ended, and its redelivery, which finds it ended, the item lost)."""
        ...

    def clear(self, image: FollowedKey, digest: Digest) -> bool:
        """A person cleared the version of ``digest`` (``tagpin clear``): its halted promotion is
        forgotten, so that a change to the digest starts a new one; False (nothing written) when
        the promotion is not a halted one of ``digest``."""
        ...

    def request_approval(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        now: int,
        expires_at: int,
        *,
        event: ImageEventRecord | None = None,
        asked_by: str | None = None,
    ) -> bool:
        """Wave ``wave`` of the rolling promotion of ``digest`` waits for a person; False when it
        already does, was approved, or the promotion moved on (nothing written). ``asked_by``: the
        change that asks (kept as ``approval_asked_by``)."""
        ...

    def decide_approval(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        approve: bool,
        now: int,
        detail: str,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        """A person's decision on the waiting wave: approved (the wave may start) or rejected (the
        promotion is halted); False when ``digest``'s wave ``wave`` was not waiting (a double
        click, a newer digest, a lapsed request): nothing written."""
        ...

    def awaiting(self, limit: int, now: int) -> list[Promotion]:
        """The promotions waiting for a person's approval now (at most ``limit``), without
        reading every promotion."""
        ...

    def lapse_approval(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        now: int,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        """The request lapsed unanswered: the promotion is halted; False when it was answered."""
        ...

    def claim_notice(
        self,
        image: FollowedKey,
        digest: Digest,
        notice: str,
        now: int,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        """True once per (promotion, notice): one notification per event, not one per retry.
        ``event``: the image's history item of the notice, written with the claim or not at all (a
        process that dies between the two would leave the notice claimed and its item lost)."""
        ...
