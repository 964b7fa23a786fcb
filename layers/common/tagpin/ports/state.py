"""What tagpin keeps in its state table, as the use cases see it: the value types, one repository
per item kind, and ``State``, the set of repositories a use case is given.

``tagpin.adapters.dynamodb`` stores them in one DynamoDB table; the key schema (which item kind
lives under which key, who writes it, who reads it) is the table in docs/architecture.md.

Every write that decides something is conditional, so two concurrent invocations cannot both win
and an older observation never replaces a newer one: the methods say what they decided (a
``bool``, a ``TagOutcome``) instead of raising.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tagpin.domain.poll_pass import PollPass
from tagpin.domain.shards import WHOLE, PollPart
from tagpin.ports.clusters import Clusters, ClusterState, Slots
from tagpin.ports.heads import BadVersion, Heads, Versions
from tagpin.ports.history import History, HistoryEntry, ImageEvent, ImageEventRecord
from tagpin.ports.index import Index, IndexEntry, ShardImages
from tagpin.ports.promotions import Promotion, Promotions, PromotionStatus
from tagpin.ports.tags import Digests, TagRecord, Tags, TagState
from tagpin.ports.targets import ENDS_MOVES, SETTLED, TargetNote, Targets, TargetState, TargetStatus

# One module per concern; the names are importable from here, where the use cases found them first.
__all__ = [
    "ENDS_MOVES",
    "SETTLED",
    "BadVersion",
    "ClusterState",
    "Clusters",
    "Digests",
    "Heads",
    "History",
    "HistoryEntry",
    "ImageEvent",
    "ImageEventRecord",
    "Index",
    "IndexEntry",
    "PollCursor",
    "Promotion",
    "PromotionStatus",
    "Promotions",
    "ShardImages",
    "Slots",
    "State",
    "TagRecord",
    "TagState",
    "Tags",
    "TargetNote",
    "TargetState",
    "TargetStatus",
    "Targets",
    "Versions",
]


class PollCursor(Protocol):
    """``POLL`` / ``CURSOR``: where the last poll (of a part) that ran out of time stopped, and
    since when its pass has gone on (``PollPass``; ``PollPass()``: the last run finished)."""

    def get(self, part: PollPart = WHOLE) -> PollPass: ...

    def put(self, position: PollPass, at: int, part: PollPart = WHOLE) -> None:
        """``at``: when (epoch ms) the run that left it stopped."""
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
    heads: Heads
