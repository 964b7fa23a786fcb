"""The local stack's moto keeps a transaction's named items, not whole tables
(``tagpin_local.moto_transactions``), and answers what moto itself answers: for transactions that
succeed, are cancelled (a condition that fails, with ``ReturnValuesOnConditionCheckFailure``), or
are refused mid-way (two operations on one item, an invalid update expression after a valid
operation), the error (code, message, cancellation reasons) and the table afterwards (every
partition moto holds, its items, its item count) are those of moto's own ``transact_write_items``;
generated transactions too; a table with a stream keeps moto's whole-table copy (a cancelled
transaction's records rolled back). And it copies no other whole table (what it is for).

Checked to fail with the patch broken: no restore after moto's rollback (5 tests: the cancelled
and refused transactions keep their writes), a restore after every transaction (the one that
succeeds, the generated ones), a restore that leaves the partitions moto's reads made (the new item
then a failed condition, the generated ones), a table with a stream kept by items (its cancelled
Put's record stays), and moto's deep copy kept (no whole-table copy)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import Table
from tagpin_local import moto_transactions
from tagpin_local.tables import create_state_table

REGION = "eu-south-2"  # none of the other tests' moto state
TABLE = "transactions"
SEED = [
    {"pk": {"S": "p0"}, "sk": {"S": "s0"}, "n": {"N": "0"}, "target_id": {"S": "t0"}},
    {"pk": {"S": "p0"}, "sk": {"S": "s1"}, "n": {"N": "1"}},
    {"pk": {"S": "p1"}, "sk": {"S": "s0"}, "n": {"N": "2"}, "target_id": {"S": "t1"}},
]

type Outcome = tuple[dict[str, Any] | None, dict[str, Any], int]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with mock_aws():
        assert moto_transactions.install()
        yield boto3.client("dynamodb", region_name=REGION)


def key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def put(pk: str, sk: str, condition: str | None = None, **extra: Any) -> dict[str, Any]:
    op: dict[str, Any] = {"TableName": TABLE, "Item": {**key(pk, sk), "n": {"N": "9"}}, **extra}
    if condition:
        op["ConditionExpression"] = condition
    return {"Put": op}


def update(
    pk: str, sk: str, expression: str = "SET n = n + :one", condition: str | None = None
) -> dict[str, Any]:
    op: dict[str, Any] = {"TableName": TABLE, "Key": key(pk, sk), "UpdateExpression": expression}
    if ":one" in expression:
        op["ExpressionAttributeValues"] = {":one": {"N": "1"}}
    if condition:
        op["ConditionExpression"] = condition
    return {"Update": op}


def delete(pk: str, sk: str, condition: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"TableName": TABLE, "Key": key(pk, sk)}
    if condition:
        op["ConditionExpression"] = condition
    return {"Delete": op}


def check(pk: str, sk: str, condition: str, all_old: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {"TableName": TABLE, "Key": key(pk, sk), "ConditionExpression": condition}
    if all_old:
        op["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"ConditionCheck": op}


def outcome(client: Any, transaction: list[dict[str, Any]]) -> Outcome:
    """The error the transaction gets (None: none), the table's partitions as moto holds them
    afterwards (empty ones too), and its item count as DescribeTable reports it."""
    create_state_table(client, TABLE)
    try:
        for item in SEED:
            client.put_item(TableName=TABLE, Item=item)
        error: dict[str, Any] | None = None
        try:
            client.transact_write_items(TransactItems=transaction)
        except ClientError as e:
            error = {k: e.response.get(k) for k in ("Error", "CancellationReasons")}
        table = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables[TABLE]
        partitions = {
            hash_value.value: {range_value.value: item.to_json() for range_value, item in partition.items()}
            for hash_value, partition in table.items.items()
        }
        count = client.describe_table(TableName=TABLE)["Table"]["ItemCount"]
        return error, partitions, count
    finally:
        client.delete_table(TableName=TABLE)


def both(client: Any, transaction: list[dict[str, Any]]) -> Outcome:
    """The installed outcome, checked to be moto's own."""
    installed = outcome(client, transaction)
    with moto_transactions.as_is():
        assert outcome(client, transaction) == installed
    return installed


def test_a_transaction_that_succeeds_writes_what_moto_writes(client: Any) -> None:
    error, partitions, count = both(client, [update("p0", "s0"), put("p2", "h0"), delete("p0", "s1")])
    assert error is None
    assert partitions["p0"]["s0"]["Attributes"]["n"] == {"N": "1"} and "s1" not in partitions["p0"]
    assert count == 3


def test_a_failed_condition_cancels_with_the_old_item_and_writes_nothing(client: Any) -> None:
    transaction = [update("p0", "s0"), put("p1", "h0"), check("p1", "s0", "n = :one", all_old=True)]
    transaction[2]["ConditionCheck"]["ExpressionAttributeValues"] = {":one": {"N": "1"}}
    error, partitions, _ = both(client, transaction)
    assert error is not None and error["Error"]["Code"] == "TransactionCanceledException"
    assert error["CancellationReasons"][2]["Item"]["n"] == {"N": "2"}
    assert partitions["p0"]["s0"]["Attributes"]["n"] == {"N": "0"} and "h0" not in partitions["p1"]


def test_two_operations_on_one_item_are_refused_and_write_nothing(client: Any) -> None:
    error, partitions, _ = both(client, [update("p0", "s0"), delete("p0", "s0")])
    assert error is not None and error["Error"]["Code"] == "ValidationException"
    assert partitions["p0"]["s0"]["Attributes"]["n"] == {"N": "0"}


def test_an_update_moto_refuses_after_a_valid_operation_writes_nothing(client: Any) -> None:
    # moto refuses it in its own update (an attribute the item lacks), after the delete ran
    error, partitions, _ = both(client, [delete("p0", "s1"), update("p1", "s0", "SET m = m + :one")])
    assert error is not None and error["Error"]["Code"] == "ValidationException"
    assert "s1" in partitions["p0"]


def test_a_new_item_then_a_failed_condition_leaves_no_item_nor_partition(client: Any) -> None:
    error, partitions, count = both(client, [put("p9", "h0"), check("p8", "s0", "attribute_exists(pk)")])
    assert error is not None and error["Error"]["Code"] == "TransactionCanceledException"
    assert "p9" not in partitions and "p8" not in partitions and count == len(SEED)


def test_no_table_is_copied_whole(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: Table, memo: Any) -> Table:
        raise AssertionError("a whole-table copy")

    create_state_table(client, TABLE)
    try:
        monkeypatch.setattr(Table, "__deepcopy__", refused, raising=False)
        client.transact_write_items(TransactItems=[put("p0", "s0"), update("p1", "s1", "SET m = :one")])
        with pytest.raises(ClientError, match="TransactionCanceled"):
            client.transact_write_items(
                TransactItems=[put("p2", "s0"), check("p3", "s0", "attribute_exists(pk)")]
            )
    finally:
        client.delete_table(TableName=TABLE)


PKS, SKS = ["p0", "p1", "p7"], ["s0", "s1", "s5"]
CONDITIONS = [None, "attribute_exists(pk)", "attribute_not_exists(pk)"]
operations = st.one_of(
    st.builds(put, st.sampled_from(PKS), st.sampled_from(SKS), st.sampled_from(CONDITIONS)),
    st.builds(
        update,
        st.sampled_from(PKS),
        st.sampled_from(SKS),
        st.sampled_from(
            ["SET n = n + :one", "SET m = :one REMOVE target_id", "SET m = m + :one", "SET n = n +"]
        ),
        st.sampled_from(CONDITIONS),
    ),
    st.builds(delete, st.sampled_from(PKS), st.sampled_from(SKS), st.sampled_from(CONDITIONS)),
    st.builds(
        check,
        st.sampled_from(PKS),
        st.sampled_from(SKS),
        st.sampled_from(["attribute_exists(pk)", "attribute_not_exists(pk)"]),
        st.booleans(),
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(operations, min_size=1, max_size=4))
def test_generated_transactions_answer_and_leave_what_moto_does(
    client: Any, transaction: list[dict[str, Any]]
) -> None:
    both(client, transaction)


def stream_records(client: Any, transaction: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stream records a table with a stream holds after the seed and ``transaction``."""
    client.create_table(
        TableName=TABLE,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    try:
        client.put_item(TableName=TABLE, Item={"pk": {"S": "p0"}, "n": {"N": "0"}})
        with pytest.raises(ClientError):
            client.transact_write_items(TransactItems=transaction)
        shard = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables[TABLE].stream_shard
        records = [record.to_json() for record in shard.items]
        images = ("Keys", "NewImage", "OldImage")  # not its clock nor its sequence numbers
        return [{"eventName": r["eventName"], **{k: r["dynamodb"].get(k) for k in images}} for r in records]
    finally:
        client.delete_table(TableName=TABLE)


def test_a_table_with_a_stream_rolls_back_its_records_as_moto_does(client: Any) -> None:
    transaction = [
        {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "p1"}}}},
        {
            "ConditionCheck": {
                "TableName": TABLE,
                "Key": {"pk": {"S": "p0"}},
                "ConditionExpression": "n = :n",
                "ExpressionAttributeValues": {":n": {"N": "1"}},
            }
        },
    ]
    installed = stream_records(client, transaction)
    with moto_transactions.as_is():
        assert stream_records(client, transaction) == installed
    assert len(installed) == 1  # the seed's; the cancelled Put's record rolled back
