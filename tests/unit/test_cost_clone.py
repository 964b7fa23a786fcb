"""The cost bench's setup copies what the real repositories wrote for one tag to the others
(``bench/cost/clone.py``) only when the copy made for the second equals what the real calls wrote
for it; otherwise every one goes through the real calls."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from tagpin_local.tables import create_state_table

from bench.cost.clone import TABLE, Cloner, substitute

NAMES = [(f"reg/bench/r000:t{i:03d}", f"local/team{i % 3}/Deployment/r000-t{i:03d}/app") for i in range(60)]


class Stack:
    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self, service: str) -> Any:
        assert service == "dynamodb"
        return self._client


@pytest.fixture
def db() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(client, TABLE)
        yield client


def every_item(db: Any) -> dict[tuple[str, str], Any]:
    pages = db.get_paginator("scan").paginate(TableName=TABLE)
    return {(i["pk"]["S"], i["sk"]["S"]): i for page in pages for i in page["Items"]}


def real_write(db: Any, i: int, shared: bool = False) -> None:
    """What a repository writes for the i-th: its state (conditional update) and a trail item."""
    image, target = NAMES[i]
    db.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "TARGET#" + target}, "sk": {"S": "STATE"}},
        UpdateExpression="SET image = :i, digest = :d, observed_at = :t",
        ConditionExpression="attribute_not_exists(pk)",
        ExpressionAttributeValues={":i": {"S": image}, ":d": {"S": "sha256:ab"}, ":t": {"N": "5"}},
    )
    db.put_item(
        TableName=TABLE,
        Item={"pk": {"S": "TARGET#" + target}, "sk": {"S": "HISTORY#5#applied"}, "image": {"S": image}},
    )
    if shared:  # one item every call changes (a counter): not copyable
        db.update_item(
            TableName=TABLE,
            Key={"pk": {"S": "COUNT"}, "sk": {"S": "STATE"}},
            UpdateExpression="ADD n :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )


def test_the_copies_are_what_the_real_calls_write(db: Any) -> None:
    cloner = Cloner(Stack(db), "target states")
    cloner.run(lambda i: real_write(db, i), NAMES)
    cloned = every_item(db)
    assert cloner.cloned

    db.delete_table(TableName=TABLE)  # the same through the real calls only
    create_state_table(db, TABLE)
    for i in range(len(NAMES)):
        real_write(db, i)
    assert every_item(db) == cloned
    assert len(cloned) == 2 * len(NAMES)


def test_an_item_every_call_changes_sends_all_through_the_real_calls(db: Any) -> None:
    cloner = Cloner(Stack(db), "target states")
    cloner.run(lambda i: real_write(db, i, shared=True), NAMES)
    assert not cloner.cloned
    items = every_item(db)
    assert items[("COUNT", "STATE")]["n"] == {"N": str(len(NAMES))}
    assert len(items) == 2 * len(NAMES) + 1


def test_substitute_replaces_names_in_keys_and_nested_values() -> None:
    item = {"pk": {"S": "TARGET#a/b"}, "m": {"M": {"x": {"L": [{"S": "img a"}, {"N": "1"}]}}}}
    assert substitute(item, [("a/b", "c/d"), ("a", "z")]) == {
        "pk": {"S": "TARGET#c/d"},
        "m": {"M": {"x": {"L": [{"S": "img z"}, {"N": "1"}]}}},
    }
