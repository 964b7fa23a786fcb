"""Messages that cross process boundaries: the change on the changes queue, the per-target unit of
work, and the verification request on the verification queue."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from tagpin.domain.refs import is_digest


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


class VerificationKind(StrEnum):
    VERIFY = (
        "verify"  # is the patched target rolled out, still progressing (look again) or failed (roll back)?
    )
    ADVANCE = "advance"  # the active wave was verified; once its soak time has passed, promote the next wave
    RETRY = "retry"  # a rollout was deferred (maintenance window, concurrency limit); re-send the change


class Verification(BaseModel):
    """A delayed rollout verification: the body of every message on the verification queue.

    A Lambda must not sleep while a Deployment rolls out, and the changes queue is FIFO (no
    per-message delay), so every "look again later" of a rollout is a verification, consumed by
    the ``verifier`` function after its delay. The queue delivers at least once and out of order:
    every step decides through conditional writes in the state table, so a duplicate changes nothing.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: VerificationKind
    image: str = Field(min_length=3, max_length=512)
    digest: str
    observed_at: int = Field(ge=0)
    target_id: str | None = None  # verify: the target
    applied_at: int | None = None  # verify: when the patch was made (epoch ms), for the timeout
    attempt: int = Field(default=0, ge=0)
    trigger: Trigger | None = None
    correlation_id: str | None = Field(default=None, max_length=256)

    def again(self) -> Verification:
        return self.model_copy(update={"attempt": self.attempt + 1})
