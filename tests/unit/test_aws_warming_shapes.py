"""A rehearsal walks every shape a real call's parameters and answer would (``aws_warming.placeholder``
with ``every``, ``aws_warming.sample``): after it, an UpdateItem with expression values and an answer
with attributes resolve no shape of botocore's model (each resolved once; an empty rehearsal left
them to the first real call). Counted at ``ShapeResolver.get_shape_by_name``."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.model import ShapeResolver
from tagpin import aws_warming


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names: list[str] = []
    original = ShapeResolver.get_shape_by_name

    def counted(self: Any, shape_name: str, member_traits: Any = None) -> Any:
        names.append(shape_name)
        return original(self, shape_name, member_traits)

    monkeypatch.setattr(ShapeResolver, "get_shape_by_name", counted)
    return names


class Raw:
    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Any:
        yield self._content


def dynamodb() -> Any:
    session = boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1")
    return aws_warming.install(session.client("dynamodb", endpoint_url="http://127.0.0.1:1"))


def test_a_rehearsed_call_leaves_no_shape_to_the_first_real_one(resolved: list[str]) -> None:
    client = dynamodb()
    assert aws_warming.rehearse(client, "UpdateItem", {"TableName": "t"})
    resolved.clear()
    attributes = {"pk": {"S": "a"}, "n": {"N": "1"}, "m": {"M": {"l": {"L": [{"BOOL": True}]}}}}

    def answer(request: Any, **_: Any) -> AWSResponse:  # the real call: serialized, signed, parsed
        body = json.dumps({"Attributes": attributes}).encode()
        return AWSResponse(request.url, 200, {"content-type": "application/x-amz-json-1.0"}, Raw(body))

    client.meta.events.register("before-send.dynamodb.UpdateItem", answer)
    found = client.update_item(
        TableName="t",
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"N": "1"}},
        ReturnValues="ALL_NEW",
    )
    assert found["Attributes"] == attributes
    assert resolved == []


def test_the_sampled_answer_fills_each_attribute_type() -> None:
    shape = dynamodb().meta.service_model.operation_model("GetItem").output_shape
    item = json.loads(json.dumps(aws_warming.sample(shape)))["Item"]["x"]
    assert {"S", "N", "B", "M", "L", "BOOL", "NULL", "SS"} <= set(item), item
    assert {"M", "L", "SS"} <= set(aws_warming.placeholder(shape.members["Item"], every=True)["x"]["M"]["x"])
