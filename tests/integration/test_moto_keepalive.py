"""moto's server as the local stack runs it in a process of its own (``tagpin_local.moto_process``,
``tagpin_local.moto_server``): a client's connection stays open from one AWS call to the next, as
AWS keeps it (werkzeug's development server closed it after every answer, so each call of a
function opened a TCP connection and moto a thread), each request's body read whole so the next
request on the connection is read as sent; and the requests are counted per operation."""

from __future__ import annotations

import http.client
import json

import boto3
from botocore.config import Config
from tagpin_local.moto_process import MotoProcess
from tagpin_local.moto_server import requests_by_operation


def _sqs_call(conn: http.client.HTTPConnection, action: str, body: dict[str, object]) -> dict[str, object]:
    conn.request(
        "POST",
        "/",
        body=json.dumps(body),
        headers={
            "X-Amz-Target": f"AmazonSQS.{action}",
            "Content-Type": "application/x-amz-json-1.0",
            "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20261127/us-east-1/sqs/aws4_request, "
            "SignedHeaders=host, Signature=0",
        },
    )
    response = conn.getresponse()
    payload = response.read()
    assert response.status == 200, payload
    assert not response.will_close, "the server closed the connection after its answer"
    answer: dict[str, object] = json.loads(payload)
    return answer


def test_calls_with_bodies_follow_one_another_on_one_connection(moto_process: MotoProcess) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", moto_process.port, timeout=10)
    try:
        url = _sqs_call(conn, "CreateQueue", {"QueueName": "kept-alive"})["QueueUrl"]
        sock = conn.sock
        for n in range(3):
            _sqs_call(conn, "SendMessage", {"QueueUrl": url, "MessageBody": f"message {n} " + "x" * 2000})
        received = _sqs_call(conn, "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10})
        assert conn.sock is sock  # the same connection all along
    finally:
        conn.close()
    messages = received["Messages"]
    assert isinstance(messages, list)
    assert sorted(m["Body"][:9] for m in messages) == ["message 0", "message 1", "message 2"]


def test_requests_are_counted_per_caller_and_operation(moto_process: MotoProcess) -> None:
    endpoint = f"http://127.0.0.1:{moto_process.port}"
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")
    sqs = session.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    # what a function container's clients send (the stack sets AWS_SDK_UA_APP_ID for each)
    named = Config(user_agent_appid="tagpin-consumer")
    consumer_sqs = session.client("sqs", endpoint_url=endpoint, region_name="us-east-1", config=named)
    sts = session.client("sts", endpoint_url=endpoint, region_name="us-east-1")
    before = requests_by_operation(endpoint)
    url = sqs.create_queue(QueueName="counted")["QueueUrl"]
    for _ in range(4):
        consumer_sqs.send_message(QueueUrl=url, MessageBody="hello")
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    sts.get_caller_identity()
    after = requests_by_operation(endpoint)

    def made(name: str) -> int:
        return after.get(name, (0, 0.0, 0.0))[0] - before.get(name, (0, 0.0, 0.0))[0]

    assert made("tagpin-consumer AmazonSQS.SendMessage") == 4
    assert made("AmazonSQS.SendMessage") == 1
    assert made("AmazonSQS.CreateQueue") == 1
    assert made("GetCallerIdentity") == 1  # a query-protocol call: its Action, from its body
    assert after["tagpin-consumer AmazonSQS.SendMessage"][2] > 0  # the CPU its threads spent
