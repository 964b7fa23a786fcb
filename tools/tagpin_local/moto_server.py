"""How the stack serves moto's WSGI app in its own process (:mod:`tagpin_local.moto_process`):
werkzeug's threaded server, as ``moto.server`` runs it, with two changes.

* Keep-alive: werkzeug's development server answers every request with ``Connection: close``
  (its ``http.server`` base cannot drain an unread body before the next request line), so each
  AWS call of a function opened a TCP connection and moto started a thread for it. AWS keeps a
  client's connection open, and botocore reuses it: here too, since :class:`KeepAliveHandler`
  reads each request's body whole before moto sees it (nothing is left unread on the connection);
  a chunked body still closes its connection.
* Counted requests: :class:`CountedRequests` counts the requests per caller and operation
  (``tagpin-consumer DynamoDB.PutItem``...) with the wall and CPU seconds moto's thread spent on
  them, served at ``GET /_tagpin/requests`` (``requests_by_operation``): what a storm costs moto
  (``bench/concurrency``), deterministic where the wall clock is not. Other parts of the process
  add rows of their own (``count``: how long DynamoDB's requests waited for their lock and held
  it, ``moto_process.serialize_dynamodb``).
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, cast
from urllib.parse import parse_qs

import httpx
from moto.moto_server.werkzeug_app import MotoRequestHandler

COUNTS_PATH = "/_tagpin/requests"

type Environ = dict[str, Any]
type StartResponse = Callable[..., Any]
type App = Callable[[Environ, StartResponse], Iterable[bytes]]


class _Body:
    """A connection's input: the request line and headers read as they come, a request's body read
    whole once (``KeepAliveHandler.make_environ``); werkzeug's read after the answer (it discards
    what the client may still send, the connection closing) then gets nothing: it would take the
    next request's bytes."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.read_whole = False

    def read(self, size: int = -1) -> bytes:
        return b"" if self.read_whole else bytes(self.stream.read(size))

    def __getattr__(self, name: str) -> Any:  # readline, close...: the stream's
        return getattr(self.stream, name)


class KeepAliveHandler(MotoRequestHandler):
    """moto's request handler, keeping an HTTP/1.1 connection open after its answer."""

    _keep = False
    # its headers and body are two writes: with Nagle's algorithm the body would wait for the
    # client's delayed ACK of the headers (40 ms) on a connection that stays open
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        self.rfile = _Body(self.rfile)  # type: ignore[assignment]

    def handle_one_request(self) -> None:
        body = cast(_Body, self.rfile)
        body.read_whole, self._keep = False, False
        super().handle_one_request()

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()
        body = cast(_Body, self.rfile)
        if "chunked" not in (self.headers.get("transfer-encoding") or "").lower():
            length = int(environ.get("CONTENT_LENGTH") or 0)
            environ["wsgi.input"] = io.BytesIO(body.read(length) if length > 0 else b"")
            body.read_whole, self._keep = True, True  # the next request line follows on the connection
        return environ

    def send_header(self, keyword: str, value: str) -> None:
        if keyword.lower() == "connection" and value.lower() == "close" and self._keep:
            return  # werkzeug's own ``Connection: close``: the client's HTTP/1.1 default applies
        super().send_header(keyword, value)


def operation(environ: Environ) -> str:
    """Who asks for what: the caller's application (``app/...`` in its User-Agent, botocore's
    ``AWS_SDK_UA_APP_ID``: the stack names each function container ``tagpin-<function>``) and the
    AWS operation, ``tagpin-consumer DynamoDB.PutItem``; the caller left out when it has none."""
    found = re.search(r"\bapp/(\S+)", str(environ.get("HTTP_USER_AGENT", "")))
    name = _operation(environ)
    return f"{found.group(1)} {name}" if found else name


def _operation(environ: Environ) -> str:
    """The AWS operation a request asks for: its ``X-Amz-Target`` (JSON protocols: SQS, DynamoDB,
    SSM, Secrets Manager; the service's API version left out), else its ``Action`` (query
    protocol: STS, SNS), else its method and first path segment (moto's own API)."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        service, _, name = target.partition(".")
        return f"{service.split('_')[0]}.{name}"
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body: bytes = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    query: dict[str, list[str]] = parse_qs(str(environ.get("QUERY_STRING", ""))) | parse_qs(
        body.decode("latin-1")
    )
    if "Action" in query:
        return query["Action"][0]
    segment = environ.get("PATH_INFO", "/").split("/")[1]
    return f"{environ.get('REQUEST_METHOD', '')} /{segment}"


_lock = threading.Lock()
_counts: dict[str, list[float]] = {}  # this process's: operation -> [requests, wall s, CPU s]


def count(name: str, wall: float, cpu: float) -> None:
    """One more request (or one part of one) under ``name``, with its wall and CPU seconds."""
    with _lock:
        row = _counts.setdefault(name, [0, 0.0, 0.0])
        row[0] += 1
        row[1] += wall
        row[2] += cpu


class CountedRequests:
    """A WSGI app counting the requests it passes to ``app`` per operation, with the wall and CPU
    seconds (of the request's thread) each took; ``GET /_tagpin/requests`` answers the counts."""

    def __init__(self, app: App) -> None:
        self.app = app

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == COUNTS_PATH:
            with _lock:
                payload = json.dumps(_counts).encode()
            start_response(
                "200 OK", [("content-type", "application/json"), ("content-length", str(len(payload)))]
            )
            return [payload]
        name = operation(environ)
        wall, cpu = time.monotonic(), time.thread_time()
        try:
            return list(self.app(environ, start_response))  # the answer made here, inside the timing
        finally:
            count(name, time.monotonic() - wall, time.thread_time() - cpu)


def requests_by_operation(endpoint: str) -> dict[str, tuple[int, float, float]]:
    """The requests moto's server at ``endpoint`` answered so far: operation -> (requests, wall
    seconds, CPU seconds); empty when the server does not count (moto's own, in-process)."""
    answer = httpx.get(endpoint + COUNTS_PATH, timeout=10)
    if answer.status_code != 200 or not answer.headers.get("content-type", "").startswith("application/json"):
        return {}
    try:
        counts = answer.json()
    except ValueError:
        return {}
    return {name: (int(n), float(wall), float(cpu)) for name, (n, wall, cpu) in counts.items()}


def serve(port: int) -> None:
    """moto's server on 127.0.0.1:``port`` until the process ends."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = CountedRequests(DomainDispatcherApplication(create_backend_app))
    make_server("127.0.0.1", port, app, threaded=True, request_handler=KeepAliveHandler).serve_forever()
