"""The cost bench bills an update on the size of the item it writes, as DynamoDB does (1 WRU a KB),
also when the answer does not carry the item (the settled-digest items of a shard grow with the
tags: several KB at 10,000), and a write of an item the state table's ``ByTarget`` index projects
(one with a ``target_id``) once more there (``bench/cost/awscalls.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from bench.cost.awscalls import AwsCalls

TABLE = "tagpin-state"


@pytest.fixture
def db(aws: None) -> Iterator[Any]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=TABLE,
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield client


@pytest.fixture
def calls(db: Any) -> Iterator[AwsCalls]:
    counted = AwsCalls()
    counted.install()
    try:
        yield counted
    finally:
        counted.uninstall()


def key(pk: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": pk}, "sk": {"S": "STATE"}}


def measure(calls: AwsCalls, write: Any) -> float:
    calls.reset()
    calls.active = True
    try:
        write()
    finally:
        calls.active = False
    calls.settle()
    return calls.wru


def test_an_update_is_billed_on_the_size_of_the_item(db: Any, calls: AwsCalls) -> None:
    db.put_item(TableName=TABLE, Item={**key("DIGESTS#00"), "~a": {"S": "x" * 2900}})  # not measured

    def update() -> None:
        db.update_item(
            TableName=TABLE,
            Key=key("DIGESTS#00"),
            UpdateExpression="SET #n = :v",
            ExpressionAttributeNames={"#n": "~b"},
            ExpressionAttributeValues={":v": {"S": "sha256:" + "0" * 64}},
        )

    assert measure(calls, update) == 3.0  # about 3,000 bytes: 3 write units, not 1
    assert calls.counts["dynamodb:UpdateItem"] == 1  # the read that sized it is not counted
    assert calls.rru == 0.0


def test_a_small_update_stays_one_unit(db: Any, calls: AwsCalls) -> None:
    def update() -> None:
        db.update_item(
            TableName=TABLE,
            Key=key("TAG#a"),
            UpdateExpression="SET d = :v",
            ExpressionAttributeValues={":v": {"S": "sha256:0"}},
        )

    assert measure(calls, update) == 1.0


def test_an_item_in_the_target_index_is_written_twice(db: Any, calls: AwsCalls) -> None:
    entry = {**key("FOLLOW#00"), "target_id": {"S": "local/team0/Deployment/a/app"}}
    assert measure(calls, lambda: db.put_item(TableName=TABLE, Item=entry)) == 2.0

    def update() -> None:
        db.update_item(
            TableName=TABLE,
            Key=key("FOLLOW#00"),
            UpdateExpression="SET seen_at = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )

    assert measure(calls, update) == 2.0


def test_a_partial_answer_is_not_billed_twice(db: Any, calls: AwsCalls) -> None:
    """``UPDATED_NEW`` answers with the attributes it set, not the item: the update is sized once,
    by ``settle``, however much of the item the answer carried (a ``target_id`` included)."""
    db.put_item(TableName=TABLE, Item={**key("FOLLOW#01"), "target_id": {"S": "t"}})  # not measured

    def update() -> None:
        db.update_item(
            TableName=TABLE,
            Key=key("FOLLOW#01"),
            UpdateExpression="SET target_id = :t",
            ExpressionAttributeValues={":t": {"S": "local/team0/Deployment/a/app"}},
            ReturnValues="UPDATED_NEW",
        )

    assert measure(calls, update) == 2.0  # 1 in the table and 1 in the index, not 3
