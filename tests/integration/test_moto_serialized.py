"""moto's server answers DynamoDB requests one at a time (``moto_process.serialize_dynamodb``), as
the local stack starts it: a Query walking the table while another request adds an item gets its
answer, not moto's ``RuntimeError: dictionary changed size during iteration`` as an HTTP 500.

The interleaving is made, not hoped for: the table's item dict pauses the walk of the Query after
its first item until the put has been answered (or 5 s have passed), and the client does not retry
(``total_max_attempts=1``), so a 500 fails the test instead of being absorbed by botocore's backoff.
Checked to fail without the lock (``TAGPIN_TEST_MOTO_UNSERIALIZED=1``: not installed)."""

from __future__ import annotations

import logging
import os
import threading
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.server import ThreadedMotoServer
from tagpin_local.moto_process import serialize_dynamodb
from tagpin_local.tables import create_state_table

SERIALIZED = os.environ.get("TAGPIN_TEST_MOTO_UNSERIALIZED") != "1"
REGION = "us-east-1"
PAUSE_S = 5.0  # how long the walk waits for the put: the whole test with the lock (it waits)


class PausingItems(defaultdict[Any, Any]):
    """A table's items that pause a walk over them after its first item until ``resume`` (or
    ``PAUSE_S``), telling ``walking`` meanwhile."""

    def __init__(self, items: dict[Any, Any]) -> None:
        super().__init__(dict, items)
        self.walking = threading.Event()
        self.resume = threading.Event()

    def values(self) -> Any:
        def walk() -> Iterator[Any]:
            for n, value in enumerate(super(PausingItems, self).values()):
                yield value
                if n == 0 and not self.walking.is_set():
                    self.walking.set()
                    self.resume.wait(PAUSE_S)

        return walk()


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    if SERIALIZED:
        serialize_dynamodb()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    client = boto3.session.Session().client(
        "dynamodb",
        endpoint_url=f"http://{host}:{port}",
        region_name=REGION,
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    try:
        yield client
    finally:
        server.stop()


def test_a_query_answers_while_another_request_adds_an_item(dynamodb: Any) -> None:
    create_state_table(dynamodb, "state")
    for i in range(3):
        item = {"pk": {"S": f"P#{i}"}, "sk": {"S": "-"}, "target_id": {"S": f"T#{i}"}}
        dynamodb.put_item(TableName="state", Item=item)
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables["state"]
    table.items = items = PausingItems(table.items)

    def query() -> Any:  # of the index: a walk of the table's items, whether or not the stack's
        # moto reads one partition per Query of the table (tagpin_local.moto_partitions)
        return dynamodb.query(
            TableName="state",
            IndexName="ByTarget",
            KeyConditionExpression="target_id = :t",
            ExpressionAttributeValues={":t": {"S": "T#1"}},
        )

    def put() -> None:
        assert items.walking.wait(10)  # the Query is inside its walk of the table
        try:
            dynamodb.put_item(TableName="state", Item={"pk": {"S": "P#new"}, "sk": {"S": "-"}})
        finally:
            items.resume.set()

    with ThreadPoolExecutor(2) as pool:
        queried, written = pool.submit(query), pool.submit(put)
        answer = queried.result()  # a 500 raises here (no retry)
        written.result()
    assert [i["pk"]["S"] for i in answer["Items"]] == ["P#1"]
    assert dynamodb.get_item(TableName="state", Key={"pk": {"S": "P#new"}, "sk": {"S": "-"}})["Item"]
