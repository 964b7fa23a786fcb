"""The state table as template.yaml declares it, for moto: its keys and its global secondary index
by target id (``tests/unit/test_console_template.py`` checks they are the template's)."""

from __future__ import annotations

from typing import Any

STATE_INDEXES: list[dict[str, Any]] = [
    {
        "IndexName": "ByTarget",
        "KeySchema": [{"AttributeName": "target_id", "KeyType": "HASH"}],
        "Projection": {"ProjectionType": "ALL"},
    }
]
STATE_ATTRIBUTES = ["pk", "sk", "target_id"]


def create_state_table(client: Any, name: str) -> None:
    """The state table (on-demand, string keys ``pk``/``sk``, the index ``ByTarget``) in moto."""
    client.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in STATE_ATTRIBUTES],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=STATE_INDEXES,
        BillingMode="PAY_PER_REQUEST",
    )
