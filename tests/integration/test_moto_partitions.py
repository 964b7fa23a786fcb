"""The local stack's moto reads one partition per Query (``tagpin_local.moto_partitions``) and
answers what moto itself answers: the same items, order, pages and counts, for Queries of the
table and of its ByTarget index, generated over a table of several partitions; and it no longer
sorts the whole table for a Query (what it is for: checked to fail without ``install``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.dynamodb.models.table import Table
from tagpin_local import moto_partitions
from tagpin_local.tables import create_state_table

TABLE = "state"
PARTITIONS = ["p0", "p1", "p2"]


@pytest.fixture(scope="module")
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(client, TABLE)
        for n in range(60):
            item = {"pk": {"S": PARTITIONS[n % 3]}, "sk": {"S": f"s{n:03d}"}, "n": {"N": str(n)}}
            if n % 4:
                item["target_id"] = {"S": f"t{n % 5}"}
            client.put_item(TableName=TABLE, Item=item)
        assert moto_partitions.install()
        yield client


queries = st.one_of(
    st.builds(
        lambda pk, prefix, forward, limit: {
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
            "ExpressionAttributeValues": {":p": {"S": pk}, ":s": {"S": prefix}},
            "ScanIndexForward": forward,
            **({"Limit": limit} if limit else {}),
        },
        st.sampled_from([*PARTITIONS, "absent"]),
        st.sampled_from(["s", "s0", "s01", "s05", "x"]),
        st.booleans(),
        st.sampled_from([None, 1, 3, 50]),
    ),
    st.builds(
        lambda pk, low, high, floor: {
            "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
            "FilterExpression": "n >= :f",
            "ExpressionAttributeValues": {
                ":p": {"S": pk},
                ":a": {"S": f"s{low:03d}"},
                ":b": {"S": f"s{high:03d}"},
                ":f": {"N": str(floor)},
            },
        },
        st.sampled_from(PARTITIONS),
        st.integers(0, 60),
        st.integers(0, 60),
        st.integers(0, 60),
    ),
    st.builds(
        lambda target, limit: {
            "IndexName": "ByTarget",
            "KeyConditionExpression": "target_id = :t",
            "ExpressionAttributeValues": {":t": {"S": target}},
            **({"Limit": limit} if limit else {}),
        },
        st.sampled_from(["t0", "t1", "t4", "absent"]),
        st.sampled_from([None, 2, 50]),
    ),
)


def pages(client: Any, query: dict[str, Any]) -> list[dict[str, Any]]:
    """Every page of a Query, each page's items, count and next key."""
    found, start = [], None
    while True:
        page = client.query(TableName=TABLE, **query, **({"ExclusiveStartKey": start} if start else {}))
        found.append({k: page.get(k) for k in ("Items", "Count", "ScannedCount", "LastEvaluatedKey")})
        start = page.get("LastEvaluatedKey")
        if not start or len(found) > 70:
            return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries)
def test_a_query_answers_what_moto_answers(dynamodb: Any, query: dict[str, Any]) -> None:
    partitioned = pages(dynamodb, query)
    with moto_partitions.as_is():
        assert partitioned == pages(dynamodb, query)


def test_a_query_of_the_table_reads_its_partition_only(dynamodb: Any, monkeypatch: Any) -> None:
    compared: list[int] = []
    real_sorted = sorted

    def counting_sorted(items: Any, **kwargs: Any) -> list[Any]:
        result = real_sorted(items, **kwargs)
        compared.append(len(result))
        return result

    import moto.dynamodb.models.table as table_module

    monkeypatch.setattr(table_module, "sorted", counting_sorted, raising=False)
    monkeypatch.setattr(moto_partitions, "sorted", counting_sorted, raising=False)
    dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "p1"}},
    )
    assert Table.query.partitioned  # type: ignore[attr-defined]
    assert compared and max(compared) == 20, f"sorted {compared} items for a partition of 20 (of 60)"
