"""moto's server answers a DynamoDB read with one state of the item, never a mix of two, while
another request updates it: its DynamoDB lock (``moto_process.serialize_dynamodb``) covers each
operation up to its answer's values, and the answer is encoded after the lock, from a snapshot
taken under it (``moto_process._snapshot``). moto updates a stored item in place, one attribute
after another (``UpdateExpressionExecutor``): an answer encoded from the item's live values while
an update runs would hold some attributes before it and some after (a torn read), which DynamoDB
never answers.

The test makes that interleaving happen, not hope for it: the read stops just before its answer
is encoded (``DynamoHandler.serialized``, outside the lock), an update then stops after setting its
first attribute, the read's answer is encoded meanwhile, then the update goes on. The answer must
hold the item as it was before the update, whole. With the answer's values taken from the live
item after the lock (no snapshot under it), this test fails (a torn answer); with the encoding
under the lock (as before), it fails too: the update cannot start before the read's answer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto.dynamodb.parsing.executors import SetExecutor
from moto.dynamodb.responses import DynamoHandler
from moto.server import ThreadedMotoServer
from tagpin_local.moto_process import serialize_dynamodb
from tagpin_local.tables import create_state_table

REGION = "us-east-1"
KEY = {"pk": {"S": "P#torn"}, "sk": {"S": "-"}}
ATTRIBUTES = ["a", "b", "c"]
PAUSE_S = 5.0  # how long either request waits for the other (all of it if the lock held both)


def client(url: str) -> Any:
    return boto3.session.Session().client(
        "dynamodb",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


@pytest.fixture
def url() -> Iterator[str]:
    serialize_dynamodb()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


class Interleaving:
    """A read stopped before its answer's encoding, an update stopped after its first attribute,
    and the read's answer encoded while the update is stopped (each wait at most ``PAUSE_S``)."""

    def __init__(self) -> None:
        self.armed = False
        self.reading = threading.Event()  # the read is about to encode its answer
        self.updating = threading.Event()  # the update has set its first attribute
        self.encoded = threading.Event()  # the read's answer is encoded
        self.overlapped = False  # the update set its first attribute before the read's encoding

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        serialized, execute = DynamoHandler.serialized, SetExecutor.execute

        def encode(handler: Any, result: Any) -> Any:
            if not self.armed or handler._get_action() not in ("GetItem", "BatchGetItem"):
                return serialized(handler, result)
            self.armed = False
            self.reading.set()
            self.overlapped = self.updating.wait(PAUSE_S)  # not if the lock still held the read
            try:
                return serialized(handler, result)
            finally:
                self.encoded.set()

        def set_one(executor: Any, item: Any) -> None:
            execute(executor, item)
            if self.reading.is_set() and not self.updating.is_set():
                self.updating.set()
                self.encoded.wait(PAUSE_S)

        monkeypatch.setattr(DynamoHandler, "serialized", encode)
        monkeypatch.setattr(SetExecutor, "execute", set_one)


@pytest.mark.parametrize("batch", [False, True], ids=["GetItem", "BatchGetItem"])
def test_a_read_answers_the_item_before_an_update_it_overlaps(
    url: str, batch: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamodb = client(url)
    table = "torn-batch" if batch else "torn"  # moto's tables outlive a server in its process
    create_state_table(dynamodb, table)
    dynamodb.put_item(TableName=table, Item=KEY | {name: {"N": "0"} for name in ATTRIBUTES})
    interleaving = Interleaving()
    interleaving.install(monkeypatch)
    answers: list[dict[str, Any]] = []

    def read() -> None:
        reader = client(url)
        if batch:
            answers.extend(reader.batch_get_item(RequestItems={table: {"Keys": [KEY]}})["Responses"][table])
        else:
            answers.append(reader.get_item(TableName=table, Key=KEY)["Item"])

    interleaving.armed = True
    reading = threading.Thread(target=read)
    reading.start()
    assert interleaving.reading.wait(PAUSE_S)
    dynamodb.update_item(
        TableName=table,
        Key=KEY,
        UpdateExpression="SET " + ", ".join(f"{name} = :n" for name in ATTRIBUTES),
        ExpressionAttributeValues={":n": {"N": "1"}},
    )
    reading.join()
    assert interleaving.overlapped  # the answer was encoded outside the lock, during the update
    before = dict.fromkeys(ATTRIBUTES, "0")
    assert [{name: item[name]["N"] for name in ATTRIBUTES} for item in answers] == [before]
    after = dynamodb.get_item(TableName=table, Key=KEY)["Item"]
    assert {name: after[name]["N"] for name in ATTRIBUTES} == dict.fromkeys(ATTRIBUTES, "1")
