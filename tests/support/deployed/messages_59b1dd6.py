# Verbatim: layers/common/tagpin/domain/messages.py at 59b1dd6, the last version before the
# messages carried the move (see tests/support/deployed/__init__.py). Do not edit.
# ruff: noqa: I001 (its imports sorted as the library sorts them)

"""Messages that cross process boundaries: the change and the delayed rollout verification, both on
the changes queue (the one queue the consumer reads), and the per-target unit of work."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, NamedTuple

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter

from tagpin.domain.channels import pinned_source
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


class Change(BaseModel):
    """A followed tag was seen pointing at ``digest`` at ``observed_at`` (epoch ms, tagpin's clock).

    The body of every message on the changes queue. ``image`` is the canonical tagged reference
    (``registry/repository:tag``). ``observed_at`` orders observations: an older one never
    replaces a newer one, in the state table or in a cluster.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    image: str = Field(min_length=3, max_length=512)
    digest: Digest
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
    # A version channel's change (``image`` is the channel's key): the version it chose, so the
    # targets are pinned to ``repository:<tag>@<digest>`` (tagpin.domain.channels).
    tag: str | None = Field(default=None, min_length=1, max_length=128)


class OnceKey(NamedTuple):
    """What makes one target's move happen once (the consumer's idempotency guard hashes it): the
    target and digest, the move (``changed_at``: a tag come back to an earlier digest is a new one)
    and a reconcile run's healing. Its order and values are those the guard hashed when it read
    them from the message with the JMESPath ``[target_id, digest, changed_at, reconcile_run]``, so
    the records deployed stacks stored keep answering."""

    target_id: str
    digest: Digest
    changed_at: int | None
    reconcile_run: str | None


class TargetChange(BaseModel):
    """One target to move to one digest: the unit that is made idempotent (``key``)."""

    model_config = ConfigDict(frozen=True)

    target_id: str
    cluster: str
    namespace: str
    kind: str
    name: str
    container: str
    image: str
    digest: Digest
    observed_at: int
    trigger: Trigger
    correlation_id: str | None = None
    reconcile_run: str | None = None
    changed_at: int | None = None
    tag: str | None = None  # a version channel's chosen version

    @property
    def source(self) -> str:
        """What the target is pinned to (before ``@digest``): the followed tag, or the channel's
        repository at its chosen version."""
        return pinned_source(self.image, self.tag)

    @property
    def key(self) -> OnceKey:
        """Its idempotency key: one roll per key."""
        return OnceKey(self.target_id, self.digest, self.changed_at, self.reconcile_run)


class VerificationKind(StrEnum):
    VERIFY = (
        "verify"  # is the patched target rolled out, still progressing (look again) or failed (roll back)?
    )
    ADVANCE = "advance"  # the active wave was verified; once its soak time has passed, promote the next wave
    RETRY = "retry"  # a rollout was deferred (maintenance window, concurrency limit); re-send the change
    EXPIRE = "expire"  # an approval request's time is up: it lapses if still unanswered (attempt: the wave)


class Verification(BaseModel):
    """A delayed rollout verification: a message on the changes queue, handled by the consumer once
    it is due (``due_at``).

    A Lambda must not sleep while a Deployment rolls out, so every "look again later" of a rollout
    is a verification. The changes queue is FIFO, which has no per-message delay: the sender sets
    ``due_at`` and the consumer hides a verification it receives early until then
    (``tagpin.adapters.sqs``). Each verification is its own message group, so it never waits behind
    a tag's changes nor holds them up, and it may be delivered more than once: every step decides
    through conditional writes in the state table, so a duplicate changes nothing.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: VerificationKind
    image: str = Field(min_length=3, max_length=512)
    digest: Digest
    observed_at: int = Field(ge=0)
    target_id: str | None = None  # verify: the target
    applied_at: int | None = None  # verify: when the patch was made (epoch ms), for the timeout
    # verify: when the rollout was last seen paused (epoch ms): the timeout counts from then
    paused_at: int | None = None
    # verify: when the pause it is held at now was first seen (epoch ms): the pause's length, for
    # rollout.max_pause_seconds and the look-again delay; None while it is not paused
    paused_since: int | None = None
    attempt: int = Field(default=0, ge=0)
    trigger: Trigger | None = None
    correlation_id: str | None = Field(default=None, max_length=256)
    # verify: the Git commit that moved the target (write-back, docs/gitops.md): the workload
    # reaches the digest once the GitOps tool applies it, so until then it is waited for
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{40,64}$")
    # When it is due (epoch ms, the sender's clock); None: at once. Set by the queue when sent.
    due_at: int | None = Field(default=None, ge=0)

    def again(self) -> Verification:
        """Again, for a rollout in progress (not paused: a later pause is a new one)."""
        return self.model_copy(update={"attempt": self.attempt + 1, "due_at": None, "paused_since": None})

    def paused(self, now_ms: int) -> Verification:
        """Again, for a rollout held at a pause step now: its timeout starts over from here, and
        the pause counts from when it was first seen."""
        return self.model_copy(
            update={
                "attempt": self.attempt + 1,
                "due_at": None,
                "paused_at": now_ms,
                "paused_since": self.pause_started(now_ms),
            }
        )

    def pause_started(self, now_ms: int) -> int:
        """When the pause the rollout is held at was first seen: ``now_ms`` for a new one (and for
        a verification sent before ``paused_since`` existed: its pause counts from this check)."""
        return self.paused_since or now_ms

    def timed_from(self, fallback_ms: int) -> int:
        """Where the verify timeout counts from: the patch (``fallback_ms`` when unknown), or the
        last check that found the rollout paused (a pause is not a rollout taking too long)."""
        return max(self.applied_at or fallback_ms, self.paused_at or 0)

    def wait_ms(self, now_ms: int) -> int:
        """How long until it is due (0: due now)."""
        return max(0, (self.due_at or 0) - now_ms)


def _message_kind(value: object) -> str:
    """A verification carries ``kind``; a change does not (messages sent before verifications
    shared the queue carry no marker, so the shape decides)."""
    fields = value if isinstance(value, dict) else vars(value)
    return "verification" if "kind" in fields else "change"


Message = Annotated[
    Annotated[Change, Tag("change")] | Annotated[Verification, Tag("verification")],
    Discriminator(_message_kind),
]
_MESSAGE: TypeAdapter[Change | Verification] = TypeAdapter(Message)


def parse_message(body: str | bytes) -> Change | Verification:
    """The body of a message on the changes queue (``pydantic.ValidationError`` if it is neither)."""
    return _MESSAGE.validate_json(body)
