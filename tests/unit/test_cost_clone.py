"""The cost bench's setup copies what the real repositories wrote for one tag to the others
(``bench/cost/clone.py``) only when the copy made for the second equals what the real calls wrote
for it; otherwise every one goes through the real calls. A tag's entry in an item its shard's tags
share is merged into that item where ``shared_key`` says it is."""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import boto3
import pytest
from moto import mock_aws
from tagpin_local.tables import create_state_table

from bench.cost.clone import TABLE, Cloner, substitute
from bench.cost.world import images, seed_index

# moto in process is not thread-safe (the same item updated by two threads); the bench's moto server
# answers DynamoDB requests one at a time (tools/tagpin_local): so are the real calls here, which the
# fallback makes side by side
SERIAL = threading.Lock()
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
    with SERIAL:
        _real_write(db, i, shared)


def _real_write(db: Any, i: int, shared: bool) -> None:
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


def shard_of(name: str) -> tuple[str, str]:
    return f"DIGESTS#{zlib.crc32(name.partition(':')[0].encode()) % 4:02x}", "STATE"


def real_record(db: Any, i: int, names: Sequence[Sequence[str]] = NAMES) -> None:
    """What a tag's state is: its own item, and its entry in the item its shard's tags share."""
    with SERIAL:
        _real_record(db, i, names)


def _real_record(db: Any, i: int, names: Sequence[Sequence[str]]) -> None:
    image = names[i][0]
    db.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "TAG#" + image}, "sk": {"S": "STATE"}},
        UpdateExpression="SET digest = :d, observed_at = :t",
        ConditionExpression="attribute_not_exists(digest)",
        ExpressionAttributeValues={":d": {"S": "sha256:ab"}, ":t": {"N": "5"}},
    )
    pk, sk = shard_of(image)
    db.update_item(
        TableName=TABLE,
        Key={"pk": {"S": pk}, "sk": {"S": sk}},
        UpdateExpression="SET #e = :t",
        ExpressionAttributeNames={"#e": "~" + image},
        ExpressionAttributeValues={":t": {"S": "0000000000005"}},
    )


# tags of 6 repositories (so of several shards), the first two in different ones
TAGS = [(f"reg/bench/r{i % 6:03d}:t{i:03d}",) for i in range(60)]


def test_entries_in_shared_items_are_merged_as_the_real_calls_write_them(db: Any) -> None:
    cloner = Cloner(Stack(db), "tag states")
    cloner.run(lambda i: real_record(db, i, TAGS), TAGS, lambda i: shard_of(TAGS[i][0]))
    cloned = every_item(db)
    assert cloner.cloned

    db.delete_table(TableName=TABLE)
    create_state_table(db, TABLE)
    for i in range(len(TAGS)):
        real_record(db, i, TAGS)
    real = every_item(db)
    assert real == cloned
    shards = {key for key in real if key[0].startswith("DIGESTS#")}
    assert len(shards) > 1 and len(real) == len(TAGS) + len(shards)


@pytest.mark.parametrize("where", [None, lambda i: ("DIGESTS#00", "STATE")])
def test_shared_items_in_unknown_places_send_all_through_the_real_calls(db: Any, where: Any) -> None:
    cloner = Cloner(Stack(db), "tag states")
    cloner.run(lambda i: real_record(db, i, TAGS), TAGS, where)
    assert not cloner.cloned
    items = every_item(db)
    assert sum(len(v) - 2 for k, v in items.items() if k[0].startswith("DIGESTS#")) == len(TAGS)


def test_the_bench_tag_states_are_what_the_real_calls_write(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``seed_index`` (the real index update, then the tag states cloned) against the same through
    the real repository calls for every tag: the same table."""
    monkeypatch.setattr(time, "time_ns", lambda: 1_700_000_000_000_000_000)
    tags = images("reg.example", 120)  # two repositories
    assert seed_index(Stack(db), tags, "sha256:" + "ab" * 32)
    cloned = every_item(db)

    db.delete_table(TableName=TABLE)
    create_state_table(db, TABLE)
    monkeypatch.setattr(
        Cloner, "run", lambda self, seed, names, shared=None: [seed(i) for i in range(len(names))]
    )
    assert not seed_index(Stack(db), tags, "sha256:" + "ab" * 32)
    real = every_item(db)
    assert real == cloned
    assert sum(1 for key in real if key[0].startswith("TAG#")) == len(tags)
    entries = sum(len(v) - 2 for k, v in real.items() if k[0].startswith("DIGESTS#"))
    assert entries == len(tags)
