"""moto helpers: tables as the template declares them."""

from __future__ import annotations

from typing import Any


def create_table(client: Any, name: str, keys: tuple[str, ...]) -> None:
    """An on-demand table with string keys: (partition) or (partition, sort)."""
    client.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": key, "KeyType": kind}
            for key, kind in zip(keys, ("HASH", "RANGE"), strict=False)
        ],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key in keys],
        BillingMode="PAY_PER_REQUEST",
    )
