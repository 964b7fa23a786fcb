"""What each target runs or is moving to, as the use cases see it (``tagpin.ports.state.State.targets``):
its state, the history notes that are not a state, and the repository of ``TARGET#<target id>``
items. ``tagpin.adapters.dynamodb.targets`` keeps them in the state table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import Digest, OptionalDigest
from tagpin.ports.history import ImageEventRecord
from tagpin.ports.tags import TagState


class TargetStatus(StrEnum):
    PENDING = "pending"  # claimed, being patched, or deferred (maintenance window, concurrency)
    APPLIED = "applied"  # patched; the rollout is being verified
    VERIFIED = "verified"  # the workload rolled out completely on this digest
    ROLLED_BACK = "rolled_back"  # the digest failed; the previous image was restored
    FAILED = "failed"
    GONE = "gone"
    PAUSED = "paused"  # the workload is annotated tagpin.dev/paused
    REMOVED = "removed"  # no longer followed: the workload was deleted, unlabelled or paused
    # A person stepped in: the workload was changed outside tagpin after tagpin's patch (a
    # `kubectl rollout undo`, a hand-set image), or someone ran `tagpin hold`, or it is annotated
    # tagpin.dev/hold. Not patched back: until the tag moves (an automatic hold), or `tagpin release`.
    HELD = "held"
    # Patched, and its rollout held at a pause (Argo Rollouts) longer than rollout.max_pause_seconds:
    # no longer followed (not failed, not rolled back, the digest not marked bad). Its wave does
    # not count as verified; the tag's next digest rolls as usual.
    STALLED = "stalled"
    # Argo CD or Flux owns the workload (docs/gitops.md): not patched live, since the tool would
    # revert it, unless gitops.patch_live names it. Its wave does not wait for it (as for paused).
    OWNED = "owned"


# A target in one of these states at the tag's digest needs nothing more from the level checks
# (a stalled one is not patched again: that would only start following the same pause again).
SETTLED = frozenset({TargetStatus.APPLIED, TargetStatus.VERIFIED, TargetStatus.STALLED})
# Outcomes that record what the target runs, and so end the moves in flight (``TargetState.claims``):
# a failure (failed, gone, paused, owned, held by its annotation) records only that its own claim
# did not patch; the claims made before it may still be on their way to their PATCH.
ENDS_MOVES = SETTLED | {TargetStatus.ROLLED_BACK}


class TargetNote(StrEnum):
    """History items of a target that are not a state it is in."""

    SUPERSEDED = "superseded"  # the outcome arrived after a newer digest claimed the target
    PLANNED = "planned"  # dry run: what would have been done
    DEFERRED = "deferred"  # a maintenance window or the concurrency limit held the start back
    BLOCKED = "blocked"  # a trust gate refused the digest here (unsigned, a platform missing)
    PUT_BACK = "put-back"  # a hold landed while tagpin patched: the image the workload ran went back on


@dataclass(frozen=True)
class TargetState:
    target_id: str
    image: FollowedKey
    digest: Digest
    observed_at: int
    status: TargetStatus
    updated_at: int
    trigger: Trigger | None = None
    detail: str | None = None
    previous_image: str | None = None
    held_digest: OptionalDigest | None = None  # HELD: the digest not to be applied again ("" for any digest)
    held_until: int | None = None  # HELD by a person until then (epoch ms); None: until released
    # HELD: the status and ``updated_at`` the hold was written over (``tagpin.usecases.interrupted``)
    held_over: TargetStatus | None = None
    held_over_at: int | None = None
    # The times of the claims of the moves in flight, none recorded since (a claim adds its own; an
    # outcome in ``ENDS_MOVES``, a hold or a removal ends them); HELD: those the hold stops
    claims: frozenset[int] = frozenset()
    held_over_claims: frozenset[int] = frozenset()
    # the commit its last outcome was written by (the write-back's: ``extra["commit"]``), else None
    commit: str | None = None

    def settled_at(self, digest: Digest) -> bool:
        """Applied or verified at ``digest``, or held against it: not behind (the level checks
        skip it, so a hold costs no message per poll)."""
        if self.status is TargetStatus.HELD:
            return self.holds(digest)
        if self.status is TargetStatus.OWNED:  # refused at this digest: not re-sent by every poll;
            return self.digest == digest  # the reconciler's heal tries it again (patch_live added)
        return self.digest == digest and self.status in SETTLED

    def interrupted(self) -> int | None:
        """Held over a claim (``pending``): the claim's time, whose patch the hold may have
        interrupted; None when the hold was written over anything else (or was settled)."""
        if self.status is not TargetStatus.HELD or self.held_over is not TargetStatus.PENDING:
            return None
        return self.held_over_at

    def interrupts(self, claimed_at: int) -> bool:
        """Held over a claim, and the claim of ``claimed_at`` is among the moves in flight the hold
        stops (``stopped_claims``)."""
        return claimed_at in self.stopped_claims()

    def stopped_claims(self) -> frozenset[int]:
        """Held: the times of the claims of the moves in flight it stops, made since tagpin last
        recorded what the target runs (``tagpin.usecases.interrupted``), the one it was written over
        among them; else none. A hold stops every move in flight, not only the one claimed last."""
        if self.status is not TargetStatus.HELD:
            return frozenset()
        at = self.interrupted()
        return self.held_over_claims if at is None else self.held_over_claims | {at}

    def holds(self, digest: Digest, now: int | None = None) -> bool:
        """Held against ``digest`` (at ``now``, when given: a hold with an end lapses). A target
        held by its annotation only (no stored hold) is not: the annotation decides, each time."""
        if self.status is not TargetStatus.HELD or self.held_digest is None:
            return False
        if now is not None and self.held_until is not None and self.held_until <= now:
            return False
        return not self.held_digest or self.held_digest == digest


class Targets(Protocol):
    """``TARGET#<target id>``: what each target runs or is moving to (with its history)."""

    def get(self, target_id: str) -> TargetState | None: ...

    def get_many(self, target_ids: list[str]) -> dict[str, TargetState]: ...

    def shown(self, target_ids: list[str]) -> dict[str, TargetState]:
        """What a console row shows of these targets (``get_many``, read as consistently): status,
        digest, detail, ``updated_at``, the hold's digest and end; the other fields are not read
        (left at their defaults). For showing, never for deciding."""
        ...

    def get_with_tag(
        self, image: FollowedKey, target_ids: list[str]
    ) -> tuple[TagState | None, dict[str, TargetState]]:
        """The tag's state (None: none yet) and these targets' (``get_many``), in one consistent
        read: what a change decides on (a digest marked bad, each target's state)."""
        ...

    def claim(
        self,
        target_id: str,
        image: FollowedKey,
        digest: Digest,
        observed_at: int,
        trigger: Trigger,
        now: int,
        detail: str | None = None,
    ) -> bool:
        """Mark the target as moving to ``digest``; False when a newer observation holds it, or a
        live hold against ``digest`` (a person's: against any)."""
        ...

    def finish(
        self,
        target_id: str,
        digest: Digest,
        status: TargetStatus,
        now: int,
        *,
        trigger: Trigger,
        detail: str | None = None,
        previous_image: str | None = None,
        correlation_id: str | None = None,
        expected: frozenset[TargetStatus] | None = None,
        extra: Mapping[str, str] | None = None,
        event: ImageEventRecord | None = None,
    ) -> bool:
        """Record how applying ``digest`` ended if the target still holds it, with a history item;
        with ``expected``, only from those states (False, and no history, when another won);
        without, from any but ``held`` (a person's hold ends only by its release or its end: False,
        and the outcome noted as superseded).
        ``event``: an image history item written with the state, or not at all (False: not
        written), as a promotion's start writes its item."""
        ...

    def remove(self, target_id: str, now: int, reason: str, *, since: int = 0) -> None:
        """The target is no longer followed (its state, if any, and a history item). Once per time
        it was followed since ``since`` (its index entry's ``seen_at``): a target removed after
        ``since`` is left as it is, so that a removal written again writes nothing."""
        ...

    def note(
        self, target_id: str, digest: Digest, note: TargetNote, now: int, detail: str, trigger: Trigger
    ) -> None:
        """A history item only: the target's state is left alone."""
        ...

    def hold(
        self,
        target_id: str,
        digest: OptionalDigest,
        now: int,
        *,
        reason: str,
        trigger: Trigger,
        until: int | None = None,
        if_still: TargetState | None = None,
        event: ImageEventRecord | None = None,
    ) -> bool:
        """Put the target on hold against ``digest`` ("" for any digest, a person's hold), until
        ``until`` or a release; False when it was held already (nothing written). With
        ``if_still``: only while the stored state is still that one (same status, digest and
        ``updated_at``): a claim, an outcome or a rollback written since wins, nothing is held.
        The status and ``updated_at`` written over are kept (``held_over``, ``held_over_at``).
        ``event``: an image history item written with the hold, or not at all."""
        ...

    def release(self, target_id: str, now: int, *, reason: str, trigger: Trigger) -> bool:
        """End a hold; False when the target was not held."""
        ...

    def interruption_settled(self, target_id: str, claimed_at: int) -> bool:
        """Forget the claims a hold stops (``TargetState.stopped_claims``), once what their patches
        did is settled; only while the target is still the hold written over ``claimed_at`` (its
        ``held_over_at``)."""
        ...

    def forget_claims(self, target_id: str, claims: frozenset[int]) -> None:
        """Drop ``claims`` from the target's claims in flight (claims too old to patch any more)."""
        ...

    def held(self, limit: int, now: int) -> list[TargetState]:
        """The targets on hold, at most ``limit``, without reading every target."""
        ...
