"""The index of label-discovered targets, as the use cases see it (``tagpin.ports.state.State.index``):
its entries (a followed tag's targets the reconciler found by label), read by tag, by shard, by
target id and by key, never by reading the whole index where one key would do; written by the
reconciler only. ``tagpin.adapters.dynamodb.index`` keeps it in the state table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tagpin.domain.channels import FollowedKey

if TYPE_CHECKING:
    from tagpin.domain.config.targets import Target


@dataclass(frozen=True)
class IndexEntry:
    """A label-discovered target of a followed tag."""

    image: FollowedKey
    target_id: str
    cluster: str
    namespace: str
    kind: str
    name: str
    container: str
    seen_at: int = 0

    @classmethod
    def of(cls, image: FollowedKey, target: Target, seen_at: int = 0) -> IndexEntry:
        """``target``, found by label following ``image`` (at ``seen_at``)."""
        return cls(
            image,
            target.id,
            target.cluster,
            target.namespace,
            target.kind.value,
            target.name,
            target.container,
            seen_at,
        )


# The tags of one shard of the index and, for each, its targets per cluster: {tag: {cluster: n}}.
ShardImages = dict[FollowedKey, dict[str, int]]


class Index(Protocol):
    """``FOLLOW``: the label-discovered targets of each followed tag (written by the reconciler)."""

    def entries(self, image: FollowedKey | None = None, shards: list[str] | None = None) -> list[IndexEntry]:
        """Every entry (of ``shards``, default all), or those of one tag."""
        ...

    def page(
        self, shard_name: str, limit: int, after: str | None = None
    ) -> tuple[list[IndexEntry], str | None]:
        """Up to ``limit`` entries of one shard in key order (``<image>#<target id>``), after the key
        ``after``; and the key to go on from, None when the shard has no more (the console's pages:
        their ``seen_at`` is not read, 0)."""
        ...

    def channel_entries(self, repository: str) -> list[IndexEntry]:
        """The entries of every version channel of ``repository`` (``registry/repository``): one
        Query, they share its shard (tagpin.domain.shards)."""
        ...

    def of_target(self, target_id: str) -> list[IndexEntry]:
        """The entries of one target, by its id (a key read, never the whole index)."""
        ...

    def get_many(self, keys: list[tuple[FollowedKey, str]]) -> list[IndexEntry]:
        """The entries of these (tag, target id), those that exist (a batched read by key)."""
        ...

    def images(self, shards: list[str]) -> dict[str, ShardImages]:
        """The tags of each shard with their targets per cluster (one item per shard)."""
        ...

    def update(self, put: list[IndexEntry], delete: list[IndexEntry]) -> None:
        """Write and delete entries; the shards' ``images`` follow."""
        ...
