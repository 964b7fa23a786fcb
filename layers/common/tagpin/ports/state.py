"""What tagpin keeps in its state table, as the use cases see it: the value types, one repository
per item kind, and ``State``, the set of repositories a use case is given.

``tagpin.adapters.dynamodb`` stores them in one DynamoDB table; the key schema (which item kind
lives under which key, who writes it, who reads it) is the table in docs/architecture.md.

Every write that decides something is conditional, so two concurrent invocations cannot both win
and an older observation never replaces a newer one: the methods say what they decided (a
``bool``, a ``TagOutcome``) instead of raising.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import TagOutcome
from tagpin.domain.shards import WHOLE, PollPart

if TYPE_CHECKING:
    from tagpin.domain.versions import VersionPolicy


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


# A target in one of these states at the tag's digest needs nothing more from the level checks.
SETTLED = frozenset({TargetStatus.APPLIED, TargetStatus.VERIFIED})


class TargetNote(StrEnum):
    """History items of a target that are not a state it is in."""

    SUPERSEDED = "superseded"  # the outcome arrived after a newer digest claimed the target
    PLANNED = "planned"  # dry run: what would have been done
    DEFERRED = "deferred"  # a maintenance window or the concurrency limit held the start back
    BLOCKED = "blocked"  # a trust gate refused the digest here (unsigned, a platform missing)


class PromotionStatus(StrEnum):
    ROLLING = "rolling"  # the active wave is being applied, verified or soaked
    COMPLETE = "complete"  # every wave verified
    HALTED = "halted"  # a target failed: the digest is bad, nothing more is promoted
    DRY_RUN = "dry_run"  # the plan was recorded, nothing patched


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
    DOWNGRADED = "downgraded"  # a person moved a version channel's head down (tagpin downgrade)
    HELD = "held"  # a target was changed outside tagpin: held, not patched back
    BLOCKED = "blocked"  # a trust gate refused the digest for a target (docs/trust.md)
    UNVERIFIED = "unverified"  # rolled, although a gate in warn mode would have blocked it
    AWAITING_APPROVAL = "awaiting_approval"  # a wave waits for a person (docs/approvals.md)
    APPROVED = "approved"
    REJECTED = "rejected"
    LAPSED = "lapsed"  # nobody decided in time
    CLEARED = "cleared"  # a person cleared a version marked bad (tagpin clear)


@dataclass(frozen=True)
class TagState:
    image: str
    digest: str
    observed_at: int  # the newest observation (epoch ms, tagpin's clock)
    changed_at: int  # when the tag moved to ``digest``
    resolved_at: int  # when the registry last answered for it
    last_error: str | None = None
    error_at: int | None = None
    bad_digest: str | None = None  # a rollout of this digest failed; cleared when the tag moves
    bad_reason: str | None = None
    version: str | None = None  # a version channel's head: the tag ``digest`` was resolved from
    # A version channel's head before the move to ``digest`` (another digest): where a rollback of
    # the head's version returns the channel to (``Tags.roll_back_head``).
    previous_version: str | None = None
    previous_digest: str | None = None

    @property
    def blocked(self) -> bool:
        """The tag points to a digest that failed: nothing applies it until the tag moves."""
        return self.bad_digest is not None and self.bad_digest == self.digest


@dataclass(frozen=True)
class TagRecord:
    result: TagOutcome  # CHANGED, UNCHANGED or STALE
    current: TagState  # the state after the write (the stored newer one when STALE)
    previous_digest: str | None


@dataclass(frozen=True)
class TargetState:
    target_id: str
    image: str
    digest: str
    observed_at: int
    status: TargetStatus
    updated_at: int
    trigger: Trigger | None = None
    detail: str | None = None
    previous_image: str | None = None
    held_digest: str | None = None  # HELD: the digest not to be applied again ("" for any digest)
    held_until: int | None = None  # HELD by a person until then (epoch ms); None: until released

    def settled_at(self, digest: str) -> bool:
        """Applied or verified at ``digest``, or held against it: not behind (the level checks
        skip it, so a hold costs no message per poll)."""
        if self.status is TargetStatus.HELD:
            return self.holds(digest)
        return self.digest == digest and self.status in SETTLED

    def holds(self, digest: str, now: int | None = None) -> bool:
        """Held against ``digest`` (at ``now``, when given: a hold with an end lapses). A target
        held by its annotation only (no stored hold) is not: the annotation decides, each time."""
        if self.status is not TargetStatus.HELD or self.held_digest is None:
            return False
        if now is not None and self.held_until is not None and self.held_until <= now:
            return False
        return not self.held_digest or self.held_digest == digest


@dataclass(frozen=True)
class Promotion:
    image: str
    digest: str
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
    approved_waves: frozenset[int] = frozenset()  # the waves a person approved for this digest

    @property
    def awaiting_approval(self) -> bool:
        return self.status is PromotionStatus.ROLLING and self.awaiting_wave is not None


@dataclass(frozen=True)
class BadVersion:
    """A version of a repository that no channel chooses again until a person clears it: its
    rollout failed and was rolled back, or a person held it back (``tagpin downgrade``)."""

    tag: str
    digest: str
    reason: str
    at: int


@dataclass(frozen=True)
class IndexEntry:
    """A label-discovered target of a followed tag."""

    image: str
    target_id: str
    cluster: str
    namespace: str
    kind: str
    name: str
    container: str
    seen_at: int = 0


@dataclass(frozen=True)
class ClusterState:
    name: str
    reconciled_at: int
    ok: bool
    error: str | None = None
    workloads: int = 0
    error_at: int | None = None


@dataclass(frozen=True)
class HistoryEntry:
    """One item of an audit trail: a target's (``status``) or an image's (``event``)."""

    at: int
    digest: str | None = None
    status: str | None = None  # a TargetStatus or a TargetNote value
    event: str | None = None  # an ImageEvent value
    trigger: str | None = None
    detail: str | None = None
    previous_image: str | None = None
    correlation_id: str | None = None
    wave: str | None = None


# -- repositories ---------------------------------------------------------------------------------


class Tags(Protocol):
    """``TAG#<image>``: the digest each followed tag points to."""

    def record(
        self, image: str, digest: str, observed_at: int, trigger: Trigger, *, moved: bool = False
    ) -> TagRecord:
        """Store an observation of the followed tag ``image`` -> ``digest``; the newest observation
        wins. Say whether it changed anything. ``moved``: the caller read the tag at another digest
        (a hint of which write to try first; the answer is the same)."""
        ...

    def move_head(
        self,
        image: str,
        digest: str,
        observed_at: int,
        trigger: Trigger,
        version: str,
        policy: VersionPolicy,
        *,
        down: bool = False,
    ) -> TagRecord:
        """A version channel's head at ``version`` -> ``digest``, in ``policy``'s order whatever the
        observations' order: a newer version moves the head (unless the version is marked bad for
        the repository), the same version is an observation of the head (the newest wins), an
        older version is STALE. Only ``down`` (a person's downgrade) moves the head down. Each
        write is conditional on the head it compared with (a concurrent move: read and compare
        again)."""
        ...

    def roll_back_head(self, image: str, digest: str, now: int) -> TagState | None:
        """The rollout of the head's version (at ``digest``) failed and was rolled back: the channel
        returns to its previous head. None (nothing written) when the head is no longer at
        ``digest`` or has no previous head."""
        ...

    def unblock(self, image: str, version: str) -> bool:
        """A person cleared ``version``: a channel whose head is that version, blocked because its
        rollout failed, may roll it again (False: not at that version, or not blocked)."""
        ...

    def record_error(self, image: str, error: str, at: int) -> None:
        """Keep the working digest; note the error and when it happened."""
        ...

    def get(self, image: str) -> TagState | None: ...

    def get_many(self, images: list[str]) -> dict[str, TagState]:
        """Eventually consistent: for skipping work when nothing changed, never for deciding."""
        ...

    def mark_bad(self, image: str, digest: str, reason: str, now: int) -> bool:
        """Block ``digest`` for ``image`` while the tag points to it (False: the tag moved on)."""
        ...


class Targets(Protocol):
    """``TARGET#<target id>``: what each target runs or is moving to (with its history)."""

    def get(self, target_id: str) -> TargetState | None: ...

    def get_many(self, target_ids: list[str]) -> dict[str, TargetState]: ...

    def claim(
        self,
        target_id: str,
        image: str,
        digest: str,
        observed_at: int,
        trigger: Trigger,
        now: int,
        detail: str | None = None,
    ) -> bool:
        """Mark the target as moving to ``digest``; False when a newer observation holds it."""
        ...

    def finish(
        self,
        target_id: str,
        digest: str,
        status: TargetStatus,
        now: int,
        *,
        trigger: Trigger,
        detail: str | None = None,
        previous_image: str | None = None,
        correlation_id: str | None = None,
        expected: frozenset[TargetStatus] | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> bool:
        """Record how applying ``digest`` ended if the target still holds it, with a history item;
        with ``expected``, only from those states (False, and no history, when another won)."""
        ...

    def remove(self, target_id: str, now: int, reason: str) -> None:
        """The target is no longer followed (its state, if any, and a history item)."""
        ...

    def note(
        self, target_id: str, digest: str, note: TargetNote, now: int, detail: str, trigger: Trigger
    ) -> None:
        """A history item only: the target's state is left alone."""
        ...

    def hold(
        self,
        target_id: str,
        digest: str,
        now: int,
        *,
        reason: str,
        trigger: Trigger,
        until: int | None = None,
        if_still: TargetState | None = None,
    ) -> bool:
        """Put the target on hold against ``digest`` ("" for any digest, a person's hold), until
        ``until`` or a release; False when it was held already (nothing written). With
        ``if_still``: only while the stored state is still that one (same status, digest and
        ``updated_at``): a claim, an outcome or a rollback written since wins, nothing is held."""
        ...

    def release(self, target_id: str, now: int, *, reason: str, trigger: Trigger) -> bool:
        """End a hold; False when the target was not held."""
        ...

    def held(self, limit: int, now: int) -> list[TargetState]:
        """The targets on hold, at most ``limit``, without reading every target."""
        ...


class History(Protocol):
    """``HIST#`` items under a target or an image: the audit trail, expiring after the retention."""

    def image_event(
        self,
        image: str,
        digest: str,
        event: ImageEvent,
        now: int,
        *,
        detail: str = "",
        wave: str | None = None,
        trigger: Trigger | None = None,
        correlation_id: str | None = None,
    ) -> None: ...

    def of_image(self, image: str, limit: int = 100) -> list[HistoryEntry]:
        """Newest first."""
        ...

    def of_target(self, target_id: str, limit: int = 50) -> list[HistoryEntry]:
        """Newest first."""
        ...


class Index(Protocol):
    """``FOLLOW``: the label-discovered targets of each followed tag (written by the reconciler)."""

    def entries(self, image: str | None = None, shards: list[str] | None = None) -> list[IndexEntry]:
        """Every entry (of ``shards``, default all), or those of one tag."""
        ...

    def page(
        self, shard_name: str, limit: int, after: str | None = None
    ) -> tuple[list[IndexEntry], str | None]:
        """Up to ``limit`` entries of one shard in key order (``<image>#<target id>``), after the key
        ``after``; and the key to go on from, None when the shard has no more (the console's pages)."""
        ...

    def channel_entries(self, repository: str) -> list[IndexEntry]:
        """The entries of every version channel of ``repository`` (``registry/repository``): one
        Query, they share its shard (tagpin.domain.shards)."""
        ...

    def update(self, put: list[IndexEntry], delete: list[IndexEntry]) -> None: ...


class Promotions(Protocol):
    """``ROLLOUT#<image>``: the promotion of a tag's newest digest through the waves."""

    def start(
        self,
        image: str,
        digest: str,
        observed_at: int,
        now: int,
        *,
        trigger: Trigger,
        correlation_id: str | None,
        dry_run: bool,
        tag: str | None = None,
    ) -> Promotion | None:
        """The promotion of ``digest`` (started here when it is newer than the stored one); None
        when a newer digest holds the tag's promotion. ``tag``: a version channel's version."""
        ...

    def get(self, image: str) -> Promotion | None: ...

    def wave_verified(self, image: str, digest: str, wave: int, now: int) -> bool:
        """Every target of the active wave is verified: start its soak (once)."""
        ...

    def advance(self, image: str, digest: str, wave: int, now: int, to: int | None = None) -> bool:
        """Move from the verified, soaked ``wave`` to wave ``to`` (default: the next one); exactly
        one caller wins."""
        ...

    def end(self, image: str, digest: str, status: PromotionStatus, now: int, detail: str) -> bool:
        """Complete or halt a rolling promotion (exactly one caller wins)."""
        ...

    def reopen(self, image: str, digest: str) -> bool:
        """A person cleared the version of ``digest`` (``tagpin clear``): its halted promotion is
        forgotten, so that a change to the digest starts a new one; False (nothing written) when
        the promotion is not a halted one of ``digest``."""
        ...

    def request_approval(self, image: str, digest: str, wave: int, now: int, expires_at: int) -> bool:
        """Wave ``wave`` of the rolling promotion of ``digest`` waits for a person; False when it
        already does, was approved, or the promotion moved on (nothing written)."""
        ...

    def decide_approval(
        self, image: str, digest: str, wave: int, approve: bool, now: int, detail: str
    ) -> bool:
        """A person's decision on the waiting wave: approved (the wave may start) or rejected (the
        promotion is halted); False when ``digest``'s wave ``wave`` was not waiting (a double
        click, a newer digest, a lapsed request): nothing written."""
        ...

    def awaiting(self, limit: int, now: int) -> list[Promotion]:
        """The promotions waiting for a person's approval now (at most ``limit``), without
        reading every promotion."""
        ...

    def lapse_approval(self, image: str, digest: str, wave: int, now: int) -> bool:
        """The request lapsed unanswered: the promotion is halted; False when it was answered."""
        ...

    def claim_notice(self, image: str, digest: str, notice: str, now: int) -> bool:
        """True once per (promotion, notice): one notification per event, not one per retry."""
        ...


class Slots(Protocol):
    """``CLUSTER#<name>`` / ``SLOTS``: the rollouts in progress in a cluster."""

    def acquire(self, cluster: str, target_id: str, digest: str, limit: int, now: int, stale_ms: int) -> bool:
        """Hold one of ``limit`` slots (already held: True); holders older than ``stale_ms`` are
        dropped when full."""
        ...

    def release(self, cluster: str, target_id: str, digest: str) -> None:
        """Give the slot back, if ``target_id`` still holds it for ``digest``."""
        ...

    def holders(self, cluster: str) -> dict[str, str]: ...


class Clusters(Protocol):
    """``CLUSTER#<name>`` / ``STATE``: the last reconcile of each cluster."""

    def record(self, name: str, now: int, *, error: str | None = None, workloads: int = 0) -> None: ...

    def get(self, name: str) -> ClusterState | None: ...


class Digests(Protocol):
    """The digest of every settled tag in a few compact items: what a steady poll and reconcile
    read instead of one item per tag. An entry is a cache of ``Tags``, never ahead of it: every
    move of a tag invalidates its entry, and an entry is written only for the move it was read at."""

    def all(self, shards: list[str] | None = None) -> dict[str, str]:
        """Tag -> digest of every entry of ``shards`` (default: all; eventually consistent)."""
        ...

    def settle(self, image: str, digest: str, changed_at: int) -> bool:
        """Add ``image``'s entry: ``digest``, which its tag moved to at ``changed_at``; False when
        the tag has moved since (nothing written)."""
        ...

    def settle_many(self, entries: Iterable[tuple[str, str, int]]) -> int:
        """``settle`` for each ``(image, digest, changed_at)``, in as few writes as the store
        allows; a tag that moved since is left out. Returns how many entries were written."""
        ...

    def drop(self, image: str) -> None: ...


class PollCursor(Protocol):
    """``POLL`` / ``CURSOR``: where the last poll (of a part) that ran out of time stopped."""

    def get(self, part: PollPart = WHOLE) -> str | None: ...

    def put(self, image: str | None, at: int, part: PollPart = WHOLE) -> None:
        """``None``: the last run finished every tag."""
        ...


class Versions(Protocol):
    """``VERSIONS#<registry/repository>``: the repository's versions marked bad, for every version
    channel of it (read in batches by the poller only when a channel's head would move)."""

    def bad(self, repositories: list[str]) -> dict[str, dict[str, BadVersion]]:
        """Each repository's bad versions by tag (repositories without any are left out)."""
        ...

    def mark_bad(self, repository: str, version: BadVersion) -> None: ...

    def clear(self, repository: str, tag: str) -> bool:
        """Forget a bad version (a person decided); False when it was not marked."""
        ...


@dataclass(frozen=True)
class State:
    """The repositories of the state table, one per item kind."""

    tags: Tags
    targets: Targets
    history: History
    index: Index
    promotions: Promotions
    slots: Slots
    clusters: Clusters
    cursor: PollCursor
    digests: Digests
    versions: Versions
