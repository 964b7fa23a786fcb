"""One DynamoDB transaction's writes (``put_write``, ``update_write``) and how its cancellation
reads (``cancellation_codes``), for ``tagpin.adapters.dynamodb.table.Table.transact``.

moto (5.x) backs up every table a transaction touches with a deep copy before it writes, so its
TransactWriteItems costs CPU in proportion to the table (AWS's does not); the local stack's moto
saves only the items a transaction names instead (``tagpin_local.moto_transactions``)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

Item = dict[str, Any]
Key = dict[str, dict[str, str]]

# A transaction's cancellation reasons that are transient (another transaction on one of its items,
# throttling): the transaction is sent again after a backoff, as unprocessed batch items are.
TRANSIENT_CANCELLATIONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)


def cancellation_codes(exc: ClientError) -> list[str]:
    """The reasons of a cancelled transaction, one per write ("None": that write was not the cause)."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return []
    return [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons") or []]


def expressed(
    request: dict[str, Any], condition: str | None, names: dict[str, str] | None, values: Item | None
) -> dict[str, Any]:
    """``request`` with its condition, names and values (a single write's or a transaction's)."""
    if condition is not None:
        request["ConditionExpression"] = condition
    if names:
        request["ExpressionAttributeNames"] = names
    if values:
        request["ExpressionAttributeValues"] = values
    return request


def put_write(
    item: Item,
    *,
    condition: str | None = None,
    names: dict[str, str] | None = None,
    values: Item | None = None,
) -> Item:
    """A transaction's put of ``item``, under ``condition`` if given (``Table.transact``)."""
    return {"Put": expressed({"Item": item}, condition, names, values)}


def update_write(
    item_key: Key,
    expression: str,
    *,
    condition: str | None = None,
    names: dict[str, str] | None = None,
    values: Item | None = None,
) -> Item:
    """A transaction's update of one item, under ``condition`` (``Table.transact``)."""
    return {"Update": expressed({"Key": item_key, "UpdateExpression": expression}, condition, names, values)}
