"""The local HTTP API answers like the deployed one, whatever arrives on its socket: raw requests
of every shape, each answered (JSON, no 5xx for what the client sent) or dropped after the read
timeout, never left hanging."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import pytest
from tagpin_local import http_adapter
from tagpin_local.stack import LocalStack

pytestmark = pytest.mark.integration


def exchange(
    stack: LocalStack, raw: bytes, wait_s: float = 5.0, half_close: bool = True
) -> tuple[int | None, dict[str, str], bytes]:
    """Send ``raw`` on a fresh connection (then close our side, unless ``half_close`` is False: a
    client still sending); the status, headers and body answered (None: no answer)."""
    url = urlsplit(stack.webhook_url)
    with socket.create_connection((url.hostname, url.port), timeout=wait_s) as conn:
        conn.sendall(raw)
        if half_close:
            conn.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
    data = b"".join(chunks)
    if not data:
        return None, {}, b""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def request(method: str, path: str = "/webhooks/distribution", headers: str = "", body: bytes = b"") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: local\r\n{headers}\r\n".encode() + body


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "FOO"])
def test_other_methods_are_405_with_allow_post(stack: LocalStack, method: str) -> None:
    status, headers, body = exchange(stack, request(method))
    assert status == 405 and headers["allow"] == "POST"
    assert json.loads(body) == {"message": "Method Not Allowed"}


@pytest.mark.parametrize(
    "raw",
    [
        b"this is not http\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",  # an HTTP/2 preface on an HTTP/1.1 port
        request("POST", headers="Content-Length: -5\r\n"),
        request("POST", headers="Content-Length: twelve\r\n"),
        request("POST", headers="Transfer-Encoding: chunked\r\n"),
    ],
    ids=["garbage", "http2-preface", "negative-length", "unreadable-length", "chunked"],
)
def test_a_malformed_request_is_400_json(stack: LocalStack, raw: bytes) -> None:
    status, headers, body = exchange(stack, raw)
    assert status == 400, (status, body)
    assert headers["content-type"] == "application/json" and "message" in json.loads(body)


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /webhooks/distribution\r\n",  # HTTP/0.9: no version, and no header would end it
        b"garbage",  # a word that starts no method, no line end yet
        bytes.fromhex("16030100f5010000f10303"),  # a TLS ClientHello on this plain-HTTP port
        b"POST /webhooks/\x00\x01",  # a control byte in the target
        b"\r\n",  # an empty line
    ],
    ids=["http09", "garbage-word", "tls-hello", "control-byte", "empty-line"],
)
def test_a_garbage_request_line_is_400_while_the_client_waits(
    stack: LocalStack, raw: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client keeps its side open and waits, as a client does: the answer comes without the
    server's read timeout (made longer than the client waits), not at it."""
    monkeypatch.setattr(http_adapter.WebhookAdapterHandler, "timeout", 60.0)
    status, headers, body = exchange(stack, raw, wait_s=5.0, half_close=False)
    assert status == 400, (status, body)
    assert headers["content-type"] == "application/json" and "Bad Request" in json.loads(body)["message"]


def test_a_request_line_arriving_in_pieces_is_still_read_whole(stack: LocalStack) -> None:
    """Judging a line early never refuses one that is only slow: its first bytes could begin one."""
    url = urlsplit(stack.webhook_url)
    body = b'{"events": []}'
    with socket.create_connection((url.hostname, url.port), timeout=5) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in (b"PO", b"ST /webhooks/dis", b"tribution HTTP/1.1\r\n"):
            conn.sendall(piece)
            time.sleep(0.05)  # not a wait for an outcome: each piece leaves on its own
        headers = (
            f"Host: local\r\nContent-Length: {len(body)}\r\nAuthorization: Bearer {stack.webhook_token}\r\n"
            "Content-Type: application/vnd.docker.distribution.events.v1+json\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(headers.encode() + body)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.split(b" ", 2)[1] == b"202", answer[:200]


def test_a_body_over_the_limit_is_413_without_reading_it(stack: LocalStack) -> None:
    raw = request("POST", headers=f"Content-Length: {http_adapter.MAX_BODY + 1}\r\n")  # no body sent
    status, _, body = exchange(stack, raw)
    assert status == 413 and str(http_adapter.MAX_BODY) in json.loads(body)["message"]


def test_an_unknown_path_is_404(stack: LocalStack) -> None:
    status, _, _ = exchange(stack, request("POST", path="/elsewhere", headers="Content-Length: 0\r\n"))
    assert status == 404


def test_a_request_that_never_finishes_is_dropped_after_the_read_timeout(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_adapter.WebhookAdapterHandler, "timeout", 1.0)
    started = time.monotonic()
    raw = request("POST", headers="Content-Length: 100\r\n", body=b"{")  # 99 bytes never come
    status, _, _ = exchange(stack, raw, wait_s=10, half_close=False)
    assert status is None  # no answer is possible for a request that never arrived in full
    assert time.monotonic() - started < 5  # the connection was closed, not held


def test_a_valid_delivery_still_reaches_the_handler(stack: LocalStack) -> None:
    body = b'{"events": []}'
    headers = (
        f"Content-Length: {len(body)}\r\nAuthorization: Bearer {stack.webhook_token}\r\n"
        "Content-Type: application/vnd.docker.distribution.events.v1+json\r\n"
    )
    status, _, answer = exchange(stack, request("POST", headers=headers, body=body))
    assert status == 202 and json.loads(answer) == {"queued": 0}


def test_a_sender_that_went_away_is_a_log_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    server = http_adapter.WebhookAdapter(("127.0.0.1", 0), http_adapter.WebhookAdapterHandler)
    caplog.set_level("INFO", logger="tagpin_local.stack")
    try:
        for gone in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
            try:
                raise gone
            except ConnectionError:
                server.handle_error(None, ("127.0.0.1", 40000))
        try:  # anything else is still reported in full
            raise ValueError("a bug")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 40000))
    finally:
        server.server_close()
    err = capsys.readouterr().err
    assert caplog.text.count("127.0.0.1 went away before the answer") == 2
    assert err.count("Traceback") == 1 and "ValueError: a bug" in err
