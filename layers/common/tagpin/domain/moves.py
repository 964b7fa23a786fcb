"""A move: a followed image going to one digest, as tagpin noticed it.

The value every gate of admission (``tagpin.usecases.admission``) is asked about, whichever path
asks: the consumer's change (``Change.move``), the dry run, ``tagpin plan`` (a digest just
resolved), the console (the tag's recorded digest). The messages (``tagpin.domain.messages``) carry
it whole: a change, each target's part of it, and the verifications that follow it.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import Digest


class Trigger(StrEnum):
    """What noticed a change (recorded on every target and history item)."""

    WEBHOOK = "webhook"
    POLL = "poll"
    RECONCILE = "reconcile"
    MANUAL = "manual"
    ECR = "ecr"
    PROMOTE = "promote"  # the verifier started the next wave of a promotion, or retried a deferred rollout
    ROLLBACK = "rollback"  # the verifier restored the previous image
    VERIFY = "verify"  # the verifier recorded the outcome of a rollout


# The move's fields, by name: the keys messages sent before they carried the move wrote flat.
FIELDS = ("image", "digest", "observed_at", "trigger", "changed_at", "correlation_id", "tag")


class Move(BaseModel):
    """``image`` is the canonical tagged reference (``registry/repository:tag``) or a version
    channel's key; ``observed_at`` (epoch ms, tagpin's clock) orders the moves of one image: an
    older one never replaces a newer one, in the state table or in a cluster."""

    model_config = ConfigDict(frozen=True)

    image: FollowedKey  # validated: 3 to MAX_KEY characters
    digest: Digest  # validated: a text that is no digest is refused here, naming the field
    observed_at: int = Field(ge=0)
    trigger: Trigger
    # When the tag moved to ``digest`` (the state's changed_at): identifies the move. A tag that
    # returns to a digest it had before (B -> C -> B) is a new move, not a repeat of the first.
    changed_at: int | None = Field(default=None, ge=0)
    correlation_id: str | None = Field(default=None, max_length=256)  # the delivery or run that saw it
    # A version channel's move (``image`` is the channel's key): the version it chose, so the
    # targets are pinned to ``repository:<tag>@<digest>`` (tagpin.domain.channels).
    tag: str | None = Field(default=None, min_length=1, max_length=128)

    def by(self, trigger: Trigger) -> Move:
        """The same move, sent on by ``trigger`` (the next wave, a retry, a person's approval)."""
        return self.model_copy(update={"trigger": trigger})

    @property
    def source(self) -> str:
        """What a target is pinned to before ``@digest``: the tag, or the channel's version."""
        return self.image.source(self.tag)
