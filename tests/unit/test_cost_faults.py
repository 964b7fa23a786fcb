"""The cost bench counts every 5xx answer of the AWS endpoint, those botocore retried included
(``bench/cost/faults.py``): a call that succeeded on its second attempt is one call for ``AwsCalls``
and one counted server error here, with its message."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest

from bench.cost.faults import ServerErrors


class FailsOnce(BaseHTTPRequestHandler):
    """DynamoDB's ListTables: a 500 the first time, an answer after."""

    answered = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        first = FailsOnce.answered == 0
        FailsOnce.answered += 1
        body = (
            {"__type": "InternalFailure", "message": "dictionary changed size during iteration"}
            if first
            else {"TableNames": []}
        )
        data = json.dumps(body).encode()
        self.send_response(500 if first else 200)
        self.send_header("content-type", "application/x-amz-json-1.0")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    FailsOnce.answered = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), FailsOnce)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()


def test_a_retried_500_is_counted_with_its_message(endpoint: str) -> None:
    client = boto3.session.Session().client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    errors = ServerErrors()
    errors.install()
    try:
        mark = errors.mark()
        assert client.list_tables()["TableNames"] == []  # botocore retried: the call succeeded
        report = errors.report(mark)
    finally:
        errors.uninstall()
    assert FailsOnce.answered == 2
    assert report["answers"] == {"dynamodb:ListTables": 1}
    assert "HTTP 500 InternalFailure" in report["first_message"]["dynamodb:ListTables"]
    assert "dictionary changed size" in report["first_message"]["dynamodb:ListTables"]
    client.list_tables()  # uninstalled: no longer counted
    assert errors.total() == 1
