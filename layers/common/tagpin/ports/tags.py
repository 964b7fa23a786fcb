"""The digest each followed tag points to, as the use cases see it (``tagpin.ports.state.State.tags``
and ``.digests``): the tag's state (a version channel's head included: ``tagpin.ports.heads``),
what recording an observation decided, and the compact cache of settled digests.
``tagpin.adapters.dynamodb.tags`` and ``.digests`` keep them in the state table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import TagOutcome
from tagpin.domain.refs import Digest


@dataclass(frozen=True)
class TagState:
    image: FollowedKey
    digest: Digest
    observed_at: int  # the newest observation (epoch ms, tagpin's clock)
    changed_at: int  # when the tag moved to ``digest``
    resolved_at: int  # when the registry last answered for it
    last_error: str | None = None
    error_at: int | None = None
    bad_digest: Digest | None = None  # a rollout of this digest failed; cleared when the tag moves
    bad_reason: str | None = None
    version: str | None = None  # a version channel's head: the tag ``digest`` was resolved from
    # Where a rollback of the head's version returns the channel (``Heads.roll_back``): the last
    # head before it that had not failed, the version its targets ran before.
    rollback_version: str | None = None
    rollback_digest: Digest | None = None

    @property
    def blocked(self) -> bool:
        """The tag points to a digest that failed: nothing applies it until the tag moves."""
        return self.bad_digest is not None and self.bad_digest == self.digest


@dataclass(frozen=True)
class TagRecord:
    result: TagOutcome  # CHANGED, UNCHANGED or STALE
    current: TagState  # the state after the write (the stored newer one when STALE)
    previous_digest: Digest | None  # the tag's digest before this write


class Tags(Protocol):
    """``TAG#<image>``: the digest each followed tag points to (a version channel's head moves
    through ``Heads``; it is read here like any tag)."""

    def record(
        self, image: FollowedKey, digest: Digest, observed_at: int, trigger: Trigger, *, moved: bool = False
    ) -> TagRecord:
        """Store an observation of the followed tag ``image`` -> ``digest``; the newest observation
        wins. Say whether it changed anything. ``moved``: the caller read the tag at another digest
        (a hint of which write to try first; the answer is the same)."""
        ...

    def record_error(self, image: FollowedKey, error: str, at: int) -> None:
        """Keep the working digest; note the error and when it happened."""
        ...

    def get(self, image: FollowedKey) -> TagState | None: ...

    def get_many(self, images: list[FollowedKey]) -> dict[FollowedKey, TagState]:
        """Eventually consistent: for skipping work when nothing changed, never for deciding."""
        ...

    def shown(self, images: list[FollowedKey]) -> dict[FollowedKey, TagState]:
        """What a console row of a target shows of its tag (``get_many``): its digest and version;
        the other fields are not read (left at their defaults). For showing, never for deciding."""
        ...

    def mark_bad(self, image: FollowedKey, digest: Digest, reason: str, now: int) -> bool:
        """Block ``digest`` for ``image`` while the tag points to it (False: the tag moved on)."""
        ...


class Digests(Protocol):
    """The digest of every settled tag in a few compact items: what a steady poll and reconcile
    read instead of one item per tag. An entry is a cache of ``Tags``, never ahead of it: every
    move of a tag invalidates its entry, and an entry is written only for the move it was read at."""

    def all(self, shards: list[str] | None = None) -> dict[str, str]:
        """Tag -> digest of every entry of ``shards`` (default: all; eventually consistent)."""
        ...

    def settle(self, image: FollowedKey, digest: Digest, changed_at: int) -> bool:
        """Add ``image``'s entry: ``digest``, which its tag moved to at ``changed_at``; False when
        the tag has moved since (nothing written)."""
        ...

    def settle_many(self, entries: Iterable[tuple[FollowedKey, Digest, int]]) -> int:
        """``settle`` for each ``(image, digest, changed_at)``, in as few writes as the store
        allows; a tag that moved since is left out. Returns how many entries were written."""
        ...

    def drop(self, image: FollowedKey) -> None: ...
