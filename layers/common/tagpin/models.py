"""Messages that cross process boundaries: the change on the queue and the per-target unit of work."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tagpin.refs import is_digest

# "promote": the verifier started the next wave of a promotion, or retried a deferred rollout.
Trigger = Literal["webhook", "poll", "reconcile", "manual", "ecr", "promote"]


class Change(BaseModel):
    """A followed tag was seen pointing at ``digest`` at ``observed_at`` (epoch ms, tagpin's clock).

    The body of every message on the changes queue. ``image`` is the canonical tagged reference
    (``registry/repository:tag``). ``observed_at`` orders observations: an older one never
    replaces a newer one, in the state table or in a cluster.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    image: str = Field(min_length=3, max_length=512)
    digest: str
    observed_at: int = Field(ge=0)
    trigger: Trigger
    correlation_id: str | None = Field(default=None, max_length=256)
    # Set by the reconciler when it saw a target NOT running ``digest`` although the consumer may
    # already have applied it (a manual edit, a rollback): the run's id joins the idempotency and
    # deduplication keys, so the change is applied again instead of being answered from the cache.
    reconcile_run: str | None = Field(default=None, max_length=128)
    # When the tag moved to ``digest`` (the state's changed_at): identifies the move. A tag that
    # returns to a digest it had before (B -> C -> B) is a new change, not a repeat of the first.
    changed_at: int | None = Field(default=None, ge=0)
    # Set by the verifier on a promotion's own changes (the next wave, a deferred retry): joins the
    # deduplication id only, so the FIFO queue does not drop it as a repeat of the first change.
    round: str | None = Field(default=None, max_length=128)

    def model_post_init(self, _context: object) -> None:
        if not is_digest(self.digest):
            raise ValueError(f"digest {self.digest!r} is not a valid digest")


class TargetChange(BaseModel):
    """One target to move to one digest: the unit that is made idempotent (key: target_id + digest)."""

    model_config = ConfigDict(frozen=True)

    target_id: str
    cluster: str
    namespace: str
    kind: str
    name: str
    container: str
    image: str
    digest: str
    observed_at: int
    trigger: Trigger
    correlation_id: str | None = None
    reconcile_run: str | None = None
    changed_at: int | None = None
