"""The state table on DynamoDB: one repository per item kind (``tagpin.ports.state``), sharing
``table.Table`` for conditional writes, batched reads and writes with retries, and paged queries.
The key schema is in ``table`` (prefixes) and, with who writes and reads each item, in
docs/architecture.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tagpin.adapters.dynamodb.clusters import DynamoClusters, DynamoSlots
from tagpin.adapters.dynamodb.cursor import DynamoPollCursor
from tagpin.adapters.dynamodb.digests import DynamoDigests
from tagpin.adapters.dynamodb.heads import DynamoHeads
from tagpin.adapters.dynamodb.history import DynamoHistory
from tagpin.adapters.dynamodb.index import DynamoIndex
from tagpin.adapters.dynamodb.promotions import DynamoPromotions
from tagpin.adapters.dynamodb.table import Table
from tagpin.adapters.dynamodb.tags import DynamoTags
from tagpin.adapters.dynamodb.targets import DynamoTargets
from tagpin.adapters.dynamodb.versions import DynamoVersions
from tagpin.ports.state import State


def dynamodb_state(client: Any, table: str, retention_days: Callable[[], int] = lambda: 90) -> State:
    """``client``: a boto3 DynamoDB client; ``retention_days``: how long history items live."""
    shared = Table(client, table, retention_days)
    history = DynamoHistory(shared)
    return State(
        tags=DynamoTags(shared),
        targets=DynamoTargets(shared, history),
        history=history,
        index=DynamoIndex(shared),
        promotions=DynamoPromotions(shared, history),
        slots=DynamoSlots(shared),
        clusters=DynamoClusters(shared),
        cursor=DynamoPollCursor(shared),
        digests=DynamoDigests(shared),
        versions=DynamoVersions(shared),
        heads=DynamoHeads(shared),
    )
