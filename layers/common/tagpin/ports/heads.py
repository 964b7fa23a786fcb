"""A version channel's state, as the use cases see it: its head (``tagpin.ports.state.State.heads``:
moved in version order, back after a rollback, cleared by a person) and the versions of its
repository marked bad (``.versions``), which no channel of it chooses again until a person clears
them. ``tagpin.adapters.dynamodb.heads`` and ``.versions`` keep them in the state table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import Digest, OptionalDigest
from tagpin.ports.tags import TagRecord, TagState

if TYPE_CHECKING:
    from tagpin.domain.versions import VersionPolicy


@dataclass(frozen=True)
class BadVersion:
    """A version of a repository that no channel chooses again until a person clears it: its
    rollout failed and was rolled back, or a person held it back (``tagpin downgrade``)."""

    tag: str
    digest: OptionalDigest
    reason: str
    at: int


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


class Heads(Protocol):
    """``TAG#<registry/repository@channel>``: a version channel's head, the version (and its
    digest) its targets are pinned to. Read like any tag (``Tags.get``); moved only here."""

    def move(
        self,
        image: FollowedKey,
        digest: Digest,
        observed_at: int,
        trigger: Trigger,
        version: str,
        policy: VersionPolicy,
        *,
        down: bool = False,
    ) -> TagRecord:
        """The head at ``version`` -> ``digest``, in ``policy``'s order whatever the observations'
        order: a newer version moves the head (unless the version is marked bad for the
        repository), the same version is an observation of the head (the newest wins), an older
        version is STALE. Only ``down`` (a person's downgrade) moves the head down. Each write is
        conditional on the head it compared with (a concurrent move: read and compare again). A
        move to another digest remembers where a rollback returns to: the head it replaced, or,
        when that one failed (blocked, or marked bad), the place that one would have returned to."""
        ...

    def roll_back(
        self, image: FollowedKey, digest: Digest, now: int, policy: VersionPolicy
    ) -> TagState | None:
        """The rollout of the head's version (at ``digest``) failed and was rolled back: the channel
        returns to its rollback version. None (nothing written) when the head is no longer at
        ``digest``, has no rollback version, or that version is marked bad (a person held it back:
        the head stays, blocked)."""
        ...

    def clear(self, image: FollowedKey, version: str, policy: VersionPolicy) -> bool:
        """A person cleared ``version`` (``tagpin clear``; any spelling ``policy`` reads as the
        same version): a head at that version, blocked because its rollout failed, may roll it
        again (False: not at that version, or not blocked)."""
        ...
