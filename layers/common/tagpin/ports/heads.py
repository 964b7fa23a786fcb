"""A version channel's state, as the use cases see it (``tagpin.ports.state.State.versions``): the
versions of a repository marked bad, which no channel of it chooses again until a person clears
them (``tagpin.adapters.dynamodb.versions``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class BadVersion:
    """A version of a repository that no channel chooses again until a person clears it: its
    rollout failed and was rolled back, or a person held it back (``tagpin downgrade``)."""

    tag: str
    digest: str
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
