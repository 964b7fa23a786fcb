"""The image history items a test's direct writes of a promotion carry, as the use cases write them
(``Promotions.start`` and ``Promotions.end`` take their item: the write and its item are one
transaction), and the two writes made with their item (``start_promotion``, ``end_promotion``).
Typed as read: a test's text is taken as it is, as the adapters take it."""

from __future__ import annotations

from typing import cast

from tagpin.domain.channels import FollowedKey
from tagpin.domain.moves import Trigger
from tagpin.domain.refs import Digest
from tagpin.ports.state import ImageEvent, ImageEventRecord, Promotion, PromotionStatus, State


def start_item(image: str, digest: str, at: int, *, dry_run: bool = False) -> ImageEventRecord:
    """The STARTED item of a promotion's start (``tagpin.usecases.apply``)."""
    event = ImageEvent.DRY_RUN_STARTED if dry_run else ImageEvent.STARTED
    return ImageEventRecord(cast(FollowedKey, image), cast(Digest, digest), event, at)


def end_item(image: str, digest: str, status: PromotionStatus, at: int, detail: str = "") -> ImageEventRecord:
    """The item of a promotion's end: COMPLETE (``tagpin.usecases.promote``), or FAILED for a halt
    (``tagpin.usecases.verify``)."""
    event = ImageEvent.COMPLETE if status is PromotionStatus.COMPLETE else ImageEvent.FAILED
    return ImageEventRecord(cast(FollowedKey, image), cast(Digest, digest), event, at, detail=detail)


def start_promotion(
    state: State,
    image: str,
    digest: str,
    at: int,
    *,
    observed_at: int | None = None,
    trigger: Trigger = Trigger.POLL,
    correlation_id: str | None = None,
    dry_run: bool = False,
    tag: str | None = None,
) -> Promotion | None:
    """``Promotions.start`` at ``at`` with its STARTED item (``observed_at``: ``at`` unless told);
    what it returns."""
    return state.promotions.start(
        cast(FollowedKey, image),
        cast(Digest, digest),
        at if observed_at is None else observed_at,
        at,
        trigger=trigger,
        correlation_id=correlation_id,
        dry_run=dry_run,
        tag=tag,
        event=start_item(image, digest, at, dry_run=dry_run),
    )


def end_promotion(
    state: State, image: str, digest: str, status: PromotionStatus, at: int, detail: str = ""
) -> bool:
    """``Promotions.end`` at ``at`` with its COMPLETE or FAILED item; whether this call ended it."""
    return state.promotions.end(
        cast(FollowedKey, image),
        cast(Digest, digest),
        status,
        at,
        detail,
        event=end_item(image, digest, status, at, detail),
    )
