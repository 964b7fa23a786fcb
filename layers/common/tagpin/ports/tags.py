"""The digest each followed tag points to, as the use cases see it (``tagpin.ports.state.State.tags``
and ``.digests``): the tag's state (a version channel's head included: ``tagpin.ports.heads``),
what recording an observation decided, and the compact cache of settled digests.
``tagpin.adapters.dynamodb.tags`` and ``.digests`` keep them in the state table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import TagOutcome

if TYPE_CHECKING:
    from tagpin.domain.versions import VersionPolicy


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


class Tags(Protocol):
    """``TAG#<image>``: the digest each followed tag points to."""

    def record(self, image: str, digest: str, observed_at: int, trigger: Trigger) -> TagRecord:
        """Store an observation of the followed tag ``image`` -> ``digest``; the newest observation
        wins. Say whether it changed anything."""
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

    def drop(self, image: str) -> None: ...
