"""moto helpers: tables as the template declares them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tagpin_local.tables import create_state_table


def create_table(client: Any, name: str, keys: tuple[str, ...]) -> None:
    """An on-demand table with string keys: (partition) or (partition, sort); with (``pk``, ``sk``)
    the state table, with its index by target id (``tagpin_local.tables``)."""
    if keys == ("pk", "sk"):
        create_state_table(client, name)
        return
    client.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": key, "KeyType": kind}
            for key, kind in zip(keys, ("HASH", "RANGE"), strict=False)
        ],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key in keys],
        BillingMode="PAY_PER_REQUEST",
    )


# DynamoDB's limits on a key's parts (bytes of UTF-8), which moto does not enforce.
PARTITION_KEY_LIMIT, SORT_KEY_LIMIT = 2048, 1024
_PARTITION, _SORT = ("pk", ":pk", ":k"), ("sk", ":sk", ":prefix", ":after")


def _key_sizes(value: Any, name: str = "") -> Iterator[tuple[str, int]]:
    """(name, bytes) of every string under a key attribute (``pk``/``sk``) or a key condition's
    value in a request's parameters."""
    if isinstance(value, dict):
        if name in _PARTITION + _SORT and isinstance(value.get("S"), str):
            yield name, len(value["S"].encode("utf-8"))
            return
        for key, inner in value.items():
            yield from _key_sizes(inner, key)
    elif isinstance(value, list):
        for inner in value:
            yield from _key_sizes(inner, name)


def enforce_key_limits(client: Any) -> Callable[[], None]:
    """Make ``client`` (a boto3 DynamoDB client) refuse a key longer than DynamoDB allows, as AWS
    does (a ValidationException), before the request reaches moto. Returns the undo."""
    from botocore.exceptions import ClientError

    def check(params: dict[str, Any], model: Any, **_: Any) -> None:
        for name, size in _key_sizes(params):
            limit = PARTITION_KEY_LIMIT if name in _PARTITION else SORT_KEY_LIMIT
            if size > limit:
                kind = "hashkey" if name in _PARTITION else "range key"
                message = f"Size of {kind} has exceeded the maximum size limit of {limit} bytes"
                error = {
                    "Code": "ValidationException",
                    "Message": "One or more parameter values were invalid: ",
                }
                error["Message"] += message
                raise ClientError({"Error": error}, model.name)

    client.meta.events.register("before-parameter-build.dynamodb", check, unique_id="enforce-key-limits")
    return lambda: client.meta.events.unregister(
        "before-parameter-build.dynamodb", unique_id="enforce-key-limits"
    )
