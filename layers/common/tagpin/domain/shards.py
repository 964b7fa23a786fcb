"""Shards: every followed tag belongs to one of ``SHARDS`` by a stable hash of its name (a version
channel by its repository's).

The state table keeps the label index and the settled digests per shard, and a poll can be split
into parts, each a fixed set of shards (``PollPart``): part ``i`` of ``n`` polls the shards whose
number is ``i`` modulo ``n``, reading only their index partitions and settled-digest items and
keeping its own cursor. The split is deterministic: a tag is always polled by the same part.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from tagpin.domain.channels import repository_part

# Fixed: a tag's shard is part of its keys. 64 keeps each shard's items small at 100,000 tags
# (about 1,600 tags, 240 KB of digests, an index partition far below DynamoDB's per-partition
# throughput) and a read of every shard cheap at 100 tags (64 items, 32 read units).
SHARDS = 64
MAX_PARTS = SHARDS


def shard(image: str) -> str:
    """The shard of a followed tag (stable across processes and versions): two hex digits. Every
    version channel of a repository is in the repository's shard (``repository_part``), so one
    Query finds them all for a push notification."""
    return format(zlib.crc32(repository_part(image).encode("utf-8", "surrogatepass")) % SHARDS, "02x")


def all_shards() -> list[str]:
    return [format(n, "02x") for n in range(SHARDS)]


@dataclass(frozen=True)
class PollPart:
    """Part ``index`` (from 0) of a poll split in ``of`` parts."""

    index: int = 0
    of: int = 1

    def __post_init__(self) -> None:
        if not (1 <= self.of <= MAX_PARTS and 0 <= self.index < self.of):
            raise ValueError(f"poll part {self.index} of {self.of}: need 0 <= part < of <= {MAX_PARTS}")

    @property
    def whole(self) -> bool:
        return self.of == 1

    @property
    def shards(self) -> list[str]:
        return [s for s in all_shards() if int(s, 16) % self.of == self.index]

    def covers(self, image: str) -> bool:
        return self.whole or int(shard(image), 16) % self.of == self.index

    @property
    def name(self) -> str:
        return "" if self.whole else f"{self.index}of{self.of}"


WHOLE = PollPart()
