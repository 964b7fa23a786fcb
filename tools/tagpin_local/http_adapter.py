"""The local stand-in for the HTTP API in front of the webhook and the console: turns HTTP requests
into API Gateway payload v2 events for the real handlers, and answers as the deployed API would,
whatever arrives.

- ``POST /webhooks/{source}``: the webhook handler's answer;
- ``GET /console``, ``GET /console/{proxy+}``, ``POST /console/{proxy+}``: the console handler's
  (cookies in the event's ``cookies``, as API Gateway sends them; each ``Set-Cookie`` of the answer's
  ``cookies``); with ``jwt_claims`` set, the console routes are behind a stand-in of the JWT
  authorizer: a request whose bearer token it does not accept is answered 401 before the function,
  the claims of one it accepts are passed in ``requestContext.authorizer.jwt.claims``;
- ``POST /slack/actions``: the console handler's too (Slack's button clicks), never behind the JWT
  authorizer's stand-in (Slack sends no token; the function verifies Slack's signature);
- another method: 405 with ``Allow: POST`` (404 under ``/console``); another path: 404;
- a malformed request (a garbage request line, an HTTP/2 preface on this HTTP/1.1 port, a
  negative or unreadable ``Content-Length``): 400; a body over ``MAX_BODY`` (API Gateway's
  payload limit): 413, without reading it. A request line is judged as soon as it cannot be one,
  not at the read timeout: first bytes no request line starts with (a TLS handshake, binary, a
  word that begins no method), a line without an HTTP version (HTTP/0.9's ``GET /``, whose
  headers the standard library would wait for), or an empty line: 400 at once;
- every connection has a read timeout: a request that never finishes arriving is dropped after
  ``READ_TIMEOUT_S``, it never holds a thread;
- every answer is JSON (never the standard library's HTML error page).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from tagpin_local.lambda_process import Function
from tagpin_local.lambda_runtime import http_api_event

log = logging.getLogger("tagpin_local.stack")

WEBHOOK_ROUTE = "POST /webhooks/{source}"
CONSOLE_ROUTES = {"GET": "GET /console/{proxy+}", "POST": "POST /console/{proxy+}"}
CONSOLE_ROOT = "GET /console"
SLACK_ROUTE = "POST /slack/actions"
MAX_BODY = 10 * 1024 * 1024  # API Gateway's payload limit (the handler has its own, lower)
READ_TIMEOUT_S = 10.0
OTHER_METHODS = ("GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT")
METHODS = tuple(m.encode() for m in ("POST", *OTHER_METHODS))
# RFC 9110's token characters: what a method is made of
TCHAR = frozenset(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


class WebhookAdapter(ThreadingHTTPServer):
    daemon_threads = True
    function: Function
    console: Function | None = None
    # The JWT authorizer's stand-in: a bearer token's claims, or None to refuse it (401). None here:
    # the console routes have no authorizer (the local stack's console signs people in itself).
    jwt_claims: Callable[[str], dict[str, Any] | None] | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A sender that gave up before the answer (the registry's notification timeout, with 50
        pushes at once) is a line in the log, not a traceback: it sends the notification again."""
        if isinstance(sys.exc_info()[1], ConnectionError):  # broken pipe, reset
            log.info("webhook adapter: %s went away before the answer", client_address[0])
            return
        super().handle_error(request, client_address)


class WebhookAdapterHandler(BaseHTTPRequestHandler):
    server: WebhookAdapter
    timeout = READ_TIMEOUT_S  # the socket's: reading a request line, headers or body

    def handle_one_request(self) -> None:
        """The standard library's, after a look at what has arrived (without consuming it): first
        bytes that cannot begin a request line are answered 400 at once, instead of waiting for
        a line end that may never come (a client waits for the answer with its socket open)."""
        try:
            # what is buffered, at least a byte; b"" when the client closed (rfile is buffered: rbufsize -1)
            start = cast(io.BufferedReader, self.rfile).peek(1)
        except TimeoutError:  # as the standard library does: a request that never came
            self.close_connection = True
            return
        problem = _not_a_request_line(start) if start else None
        if problem is None:
            super().handle_one_request()
            return
        self.raw_requestline, self.requestline, self.command = b"", "", ""
        self.send_error(400, f"Bad Request: {problem}")

    def parse_request(self) -> bool:
        words = self.raw_requestline.split()
        if len(words) in (0, 2):  # an empty line; or HTTP/0.9 (no version): no header would end it
            self.command, self.requestline = "", self.raw_requestline.decode("latin-1").rstrip("\r\n")
            self.send_error(400, "Bad Request: a request line needs a method, a target and HTTP/1.1")
            return False
        return super().parse_request()

    def do_POST(self) -> None:
        path, _, query = self.path.partition("?")
        length = self._content_length()
        if length is None:
            return
        if _console(path) or path == "/slack/actions":
            self._console("POST", path, query, length)
            return
        if not path.startswith("/webhooks/"):
            self._reply(404, {"message": "Not Found"})
            return
        body = self.rfile.read(length) if length else b""
        if len(body) < length:  # the client went away, or the read timed out
            self.close_connection = True
            return
        event = http_api_event(
            "POST", path, query, dict(self.headers.items()), body, self.client_address[0], WEBHOOK_ROUTE
        )
        try:
            response = self.server.function.invoke(event)
        except Exception as exc:  # what API Gateway does when the function fails
            log.exception("webhook handler failed")
            self._reply(500, {"message": f"Internal Server Error: {type(exc).__name__}"})
            return
        self.send_response(int(response.get("statusCode", 200)))
        for key, value in (response.get("headers") or {}).items():
            self.send_header(key, value)
        payload = (response.get("body") or "").encode()
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _content_length(self) -> int | None:
        """The body's length, or None after answering 400 or 413."""
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            self._reply(
                400, {"message": "chunked bodies are not accepted: send a Content-Length"}, close=True
            )
            return None
        raw = self.headers.get("content-length") or "0"
        try:
            length = int(raw)
        except ValueError:
            length = -1
        if length < 0:
            self._reply(400, {"message": f"invalid Content-Length {raw[:40]!r}"}, close=True)
            return None
        if length > MAX_BODY:
            self._reply(
                413, {"message": f"Request Entity Too Large: the limit is {MAX_BODY} bytes"}, close=True
            )
            return None
        return length

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if not _console(path):
            self._other_method()
            return
        length = self._content_length()
        if length is not None:
            self._console("GET", path, query, length)

    def _console(self, method: str, path: str, query: str, length: int) -> None:
        """A console route: its function's answer, as the HTTP API gives it."""
        body = self.rfile.read(length) if length else b""
        if len(body) < length or self.server.console is None:
            self._reply(404, {"message": "Not Found"})
            return
        claims = None
        slack = path == "/slack/actions"
        if self.server.jwt_claims is not None and not slack:
            scheme, _, token = (self.headers.get("authorization") or "").strip().partition(" ")
            claims = self.server.jwt_claims(token.strip()) if scheme.lower() == "bearer" and token else None
            if claims is None:
                self._reply(401, {"message": "Unauthorized"}, headers={"www-authenticate": "Bearer"})
                return
        route = CONSOLE_ROOT if path.rstrip("/") == "/console" and method == "GET" else CONSOLE_ROUTES[method]
        route = SLACK_ROUTE if slack else route
        headers = dict(self.headers.items())
        headers["x-forwarded-proto"] = "http"  # as API Gateway says how the client came (https there)
        event = http_api_event(method, path, query, headers, body, self.client_address[0], route, claims)
        try:
            response = self.server.console.invoke(event)
        except Exception as exc:
            log.exception("console handler failed")
            self._reply(500, {"message": f"Internal Server Error: {type(exc).__name__}"})
            return
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode()
        self.send_response(int(response.get("statusCode", 200)))
        for key, value in (response.get("headers") or {}).items():
            self.send_header(key, value)
        for cookie in response.get("cookies") or []:
            self.send_header("set-cookie", cookie)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _other_method(self) -> None:
        if _console(self.path.partition("?")[0]):  # the console's routes are GET and POST only
            self._reply(404, {"message": "Not Found"})
            return
        self._reply(405, {"message": "Method Not Allowed"}, allow=True)

    do_HEAD = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_TRACE = do_CONNECT = _other_method

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's errors (an unknown method, a malformed request line, an HTTP
        version this port does not speak), answered as the deployed API answers: JSON, and never
        a 5xx for what the client sent."""
        if code == 501:  # a method the handler has no do_ for
            self._reply(405, {"message": "Method Not Allowed"}, allow=True, close=True)
            return
        status = code if code < 500 else 400
        self._reply(status, {"message": message or "Bad Request"}, close=True)

    def _reply(
        self,
        status: int,
        body: dict[str, Any],
        *,
        allow: bool = False,
        close: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        payload = json.dumps(body).encode()
        if getattr(self, "request_version", None) not in ("HTTP/1.0", "HTTP/1.1"):
            self.request_version = "HTTP/1.1"  # a request line we could not read: answer in HTTP/1.1
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        if allow:
            self.send_header("allow", "POST")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if close:
            self.send_header("connection", "close")
            self.close_connection = True
        self.end_headers()
        if getattr(self, "command", None) != "HEAD":
            self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook adapter: " + format, *args)


def _console(path: str) -> bool:
    return path == "/console" or path.startswith("/console/")


def _not_a_request_line(start: bytes) -> str | None:
    """Why the first bytes of a request cannot begin an HTTP/1.x request line; None when they may
    (a complete line is left to the standard library's parser)."""
    if b"\n" in start:
        return None
    method, space, rest = start.partition(b" ")
    if not all(byte in TCHAR for byte in method):
        return "the request line does not start with a method"
    if not space and not any(known.startswith(method) for known in METHODS):
        return f"no method starts with {method[:20].decode('latin-1')!r}"
    if any(byte < 0x20 or byte > 0x7E for byte in rest.rstrip(b"\r")):
        return "the request line holds a byte that is not printable ASCII"
    return None
