"""``tagpin.aws_warming``: a rehearsed AWS operation sends nothing, while another thread's call of
the same client, made during the rehearsal, is sent and answered as ever (the local stack's thread
containers share their clients). Against a real HTTP endpoint on 127.0.0.1 that counts requests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from tagpin import aws_warming

QUEUE = "http://127.0.0.1:1/123456789012/tagpin-notifications"


class _Endpoint(BaseHTTPRequestHandler):
    seen: list[str]

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        self.seen.append(
            self.headers["x-amz-target"] + " " + json.loads(self.rfile.read(length))["MessageBody"]
        )
        body = json.dumps({"MessageId": "sent", "MD5OfMessageBody": "-"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/x-amz-json-1.0")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (_Endpoint,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def sqs(url: str) -> Any:
    session = boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1")
    return session.client("sqs", endpoint_url=url)


def test_a_rehearsal_sends_nothing_while_another_threads_call_is_sent(
    endpoint: tuple[str, list[str]],
) -> None:
    url, seen = endpoint
    client = aws_warming.install(sqs(url))
    signed = threading.Event()
    answers: dict[str, Any] = {}

    def other_thread(request: Any, **_: Any) -> None:
        """Inside the rehearsal, once it is signed (the step before sending): another thread calls
        the same client and waits for its answer."""
        if threading.current_thread() is threading.main_thread() and not signed.is_set():
            signed.set()
            caller = threading.Thread(
                target=lambda: answers.update(
                    other=client.send_message(QueueUrl=QUEUE, MessageBody="the other thread's")
                )
            )
            caller.start()
            caller.join(timeout=30)

    client.meta.events.register("before-send", other_thread)
    assert aws_warming.rehearse(client, "SendMessage", {"QueueUrl": QUEUE, "MessageBody": "rehearsed"})
    assert signed.is_set()
    assert answers["other"]["MessageId"] == "sent"
    assert seen == ["AmazonSQS.SendMessage the other thread's"]  # the rehearsal never reached it
    client.send_message(QueueUrl=QUEUE, MessageBody="after")  # and the client sends again after it
    assert seen[-1] == "AmazonSQS.SendMessage after"


def test_a_client_without_the_hook_is_not_rehearsed(endpoint: tuple[str, list[str]]) -> None:
    url, seen = endpoint
    assert not aws_warming.rehearse(sqs(url), "SendMessage", {"QueueUrl": QUEUE, "MessageBody": "-"})
    assert seen == []


def test_a_query_protocol_operation_is_rehearsed_and_parsed() -> None:
    """SNS answers in XML (the query protocol): its empty answer parses; nothing can be sent (the
    endpoint refuses connections)."""
    session = boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1")
    client = aws_warming.install(session.client("sns", endpoint_url="http://127.0.0.1:1"))
    topic = "arn:aws:sns:us-east-1:123456789012:tagpin"
    assert aws_warming.rehearse(client, "Publish", {"TopicArn": topic, "Message": "-"})


def test_placeholders_fill_the_required_parameters() -> None:
    session = boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1")
    shape = session.client("dynamodb").meta.service_model.operation_model("UpdateItem").input_shape
    assert aws_warming.placeholder(shape, {"TableName": "t"}) == {"TableName": "t", "Key": {}}
