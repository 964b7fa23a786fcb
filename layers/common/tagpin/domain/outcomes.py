"""What each use case decided, as values: an enum of outcomes per use case, and the small frozen
results that carry them between modules. Strings appear only at the edges (JSON logs, DynamoDB
attributes, HTTP responses), through the enums' values.

Vocabulary (one name per concept, in code, docs and CLI):
- *resolve*: ask a registry which digest a tag points to now (a ``Resolution``);
- *observation*: a resolution recorded in the state table and compared with the targets
  (``Observation``, outcome ``TagOutcome``); *detect* = resolve + observe;
- *apply*: move the targets of a tag to a digest (``ApplyResult``, outcome ``ApplyOutcome``);
- *verification*: a delayed look at a rollout after the patch, a promotion's soak, or a deferred
  start (``tagpin.domain.messages.Verification``; outcome ``VerificationOutcome``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import Digest


class TagOutcome(StrEnum):
    """What observing a tag decided."""

    CHANGED = "changed"  # first sighting or a new digest: act on it
    UNCHANGED = "unchanged"  # same digest as stored
    STALE = "stale"  # a newer observation is already stored: ignore this one
    ERROR = "error"  # the registry could not be asked: the working digest is kept
    IGNORED = "ignored"  # not a change: an attestation-only index change, or an unfollowed tag
    DUPLICATE = "duplicate"  # a webhook delivery seen before


@dataclass(frozen=True)
class Observation:
    """A tag resolved and recorded: what was decided, and whether a change was enqueued."""

    image: FollowedKey
    outcome: TagOutcome
    digest: Digest | None = None
    previous_digest: Digest | None = None
    enqueued: bool = False
    behind: int = 0  # targets not at the digest
    error: str | None = None
    hint_confirmed: bool | None = None  # a notification's digest, confirmed by the registry or not
    reason: str | None = None  # why it was ignored
    delivery_id: str | None = None  # the duplicate delivery

    def as_dict(self) -> dict[str, object]:
        """The JSON form (responses and logs): absent fields left out."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


class ApplyOutcome(StrEnum):
    """What applying a change did: to one target, or to the change as a whole."""

    PATCHED = "patched"
    ALREADY_CURRENT = "already-current"  # the target already ran the pinned image
    SUPERSEDED = "superseded"  # a newer digest holds the tag or the target
    DEFERRED = "deferred"  # a maintenance window or the concurrency limit: tried again later
    BLOCKED = "blocked"  # the digest is marked bad, or its promotion was halted
    FAILED = "failed"
    GONE = "gone"  # the workload does not exist
    PAUSED = "paused"  # the workload is annotated tagpin.dev/paused
    HELD = "held"  # a person stepped in (a rollout undone, tagpin hold, tagpin.dev/hold): left alone
    OWNED = "owned"  # Argo CD or Flux owns the workload: not patched live (docs/gitops.md)
    WRITE_BACK = "write-back"  # owned, and moved through Git instead: sent to the write-back function
    AWAITING_APPROVAL = "awaiting-approval"  # its wave waits for a person's decision
    PLANNED = "planned"  # dry run: recorded what would be done
    NOT_FOLLOWED = "not-followed"  # the image is no longer followed


class ApplyResult(BaseModel):
    """One target's outcome (``target`` set), or the whole change's (``target`` None). A pydantic
    model: the consumer's idempotency guard stores and returns it."""

    model_config = ConfigDict(frozen=True)

    outcome: ApplyOutcome
    target: str | None = None
    image: FollowedKey | None = None
    error: str | None = None
    detail: str | None = None
    previous_image: str | None = None


class RestoreOutcome(StrEnum):
    RESTORED = "restored"
    NOT_RUNNING = "not-running"  # the container does not run the failed digest: nothing to undo
    NO_PREVIOUS = "no-previous"  # tagpin did not replace anything there: nothing to restore
    # Argo Rollouts with canary steps, analysis or blue-green: Argo aborts and goes back itself
    LEFT_TO_ARGO = "left-to-argo-rollouts"
    HELD = "held"  # a person put the target on hold: it stays where it is
    # the hold that asked for the put-back is no longer over that claim (released, or settled by
    # another since): nothing is put back, the person's release stands
    RELEASED = "released"


class VerificationOutcome(StrEnum):
    """What the verifier decided for one verification."""

    VERIFIED = "verified"
    PROGRESSING = "progressing"  # looked again later
    PAUSED = "paused"  # held at a pause step (Argo Rollouts): looked again later, not timed
    STALLED = "stalled"  # paused longer than rollout.max_pause_seconds: no longer followed
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"
    SUPERSEDED = "superseded"  # the target moved to another digest
    GONE = "gone"  # the workload was deleted during its rollout
    CHANGED = "changed"  # someone else changed the workload since the patch
    ALREADY_DECIDED = "already-decided"  # another verification decided this target first
    NOT_ROLLING = "not-rolling"  # the promotion of this digest is not rolling (complete, halted, newer)
    NOT_FOLLOWED = "not-followed"
    WAITING = "waiting"  # targets of the active wave are not verified yet
    SOAKING = "soaking"  # the active wave is verified; the next starts after its soak
    WAVE_STARTED = "wave-started"
    COMPLETE = "complete"
    RACED = "raced"  # another invocation made the same step first
    RESENT = "re-sent"  # a deferred rollout's change was sent again


@dataclass(frozen=True)
class VerificationResult:
    outcome: VerificationOutcome
    detail: str = ""
