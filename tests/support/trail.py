"""The image history items a test's direct writes of a promotion carry, as the use cases write them
(``Promotions.start`` and ``Promotions.end`` take their item: the write and its item are one
transaction). Typed as read: a test's text is taken as it is, as the adapters take it."""

from __future__ import annotations

from typing import cast

from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import Digest
from tagpin.ports.state import ImageEvent, ImageEventRecord, PromotionStatus


def start_item(image: str, digest: str, at: int, *, dry_run: bool = False) -> ImageEventRecord:
    """The STARTED item of a promotion's start (``tagpin.usecases.apply``)."""
    event = ImageEvent.DRY_RUN_STARTED if dry_run else ImageEvent.STARTED
    return ImageEventRecord(cast(FollowedKey, image), cast(Digest, digest), event, at)


def end_item(image: str, digest: str, status: PromotionStatus, at: int, detail: str = "") -> ImageEventRecord:
    """The item of a promotion's end: COMPLETE (``tagpin.usecases.promote``), or FAILED for a halt
    (``tagpin.usecases.verify``)."""
    event = ImageEvent.COMPLETE if status is PromotionStatus.COMPLETE else ImageEvent.FAILED
    return ImageEventRecord(cast(FollowedKey, image), cast(Digest, digest), event, at, detail=detail)
