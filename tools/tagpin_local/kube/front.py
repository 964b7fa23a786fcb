"""A fault-injecting front for a real API server: the controls the stack's fault tests use.

:class:`KubeFront` listens on 127.0.0.1 with TLS (a certificate of the cluster's CA, so the
cluster's kubeconfig works with only ``server`` changed) and forwards every request to the API
server, streaming answers (watches included), unless a fault takes it first:

- :meth:`KubeFront.inject`: answer ``status`` (a Kubernetes ``Status``; 429 and 503 carry
  ``Retry-After: 1``), close the connection (``drop``), wait (``delay``) or run an ``action`` before
  forwarding, ``times`` times (None: always), for a method (or ``*``) and a path regex.
- :meth:`KubeFront.set_down`: every request is dropped (``"close"``) or answered 503 (``"503"``).
- :meth:`KubeFront.count` and :attr:`KubeFront.requests`: what reached the front, and how it was
  answered.

Who the client is survives the hop. A bearer token is passed on as it is. A client certificate
ends at the front (TLS does), so the front verifies it against the cluster's CA and asserts the
user and groups it names in ``X-Remote-User``/``X-Remote-Group``, which the API server believes
only from a caller with the front-proxy certificate (``--requestheader-*``, the mechanism of the
aggregation layer). The real authenticator and authorizer still decide.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from .pki import KeyPair

HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "host", "content-length", "upgrade", "te", "trailer"}
)
REMOTE = re.compile(r"^x-remote-", re.IGNORECASE)  # never taken from a client


@dataclass(slots=True)
class RequestRecord:
    method: str
    path: str  # without the query string
    content_type: str | None
    status: int | None = None  # the answer's (the API server's or a fault's); None: none (yet)


@dataclass
class Fault:
    """An injected failure; see :meth:`KubeFront.inject`."""

    method: str
    pattern: re.Pattern[str]
    status: int | None
    times: int | None
    delay: float
    drop: bool
    action: Callable[[], object] | None = None
    hits: int = 0


def status_object(code: int, message: str) -> dict[str, Any]:
    reasons = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 409: "Conflict"}
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reasons.get(code, "Unknown"),
        "code": code,
    }


class KubeFront:
    def __init__(self, upstream: str, ca: KeyPair, serving: KeyPair, proxy: KeyPair) -> None:
        """``upstream``: the API server's URL; ``ca``: the cluster's CA (it signed ``serving``, the
        API server's certificate and the clients'); ``proxy``: the front-proxy client certificate."""
        self.upstream = upstream.rstrip("/")
        self.requests: list[RequestRecord] = []
        self.port = 0
        self._faults: list[Fault] = []
        self._down: str | None = None
        self._lock = threading.Lock()
        self._server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca.cert))
        self._server_ssl.load_cert_chain(serving.cert, serving.key)
        self._server_ssl.verify_mode = ssl.CERT_OPTIONAL  # a token client shows no certificate
        # The front-proxy certificate goes only with X-Remote-User: the API server treats a request
        # with a certificate but no user as unauthenticated (401), not as anonymous.
        self._plain_ssl = ssl.create_default_context(cafile=str(ca.cert))
        self._proxy_ssl = ssl.create_default_context(cafile=str(ca.cert))
        self._proxy_ssl.load_cert_chain(proxy.cert, proxy.key)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubefront", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    # -- the controls
    def inject(
        self,
        method: str,
        path_regex: str,
        *,
        status: int | None = 500,
        times: int | None = 1,
        delay: float = 0.0,
        drop: bool = False,
        action: Callable[[], object] | None = None,
    ) -> Fault:
        """Fail matching requests: ``method`` is an HTTP verb or ``*``; ``path_regex`` is searched in
        the path (no query). ``status=None`` forwards the request (after ``delay`` and ``action``);
        ``drop=True`` closes the connection without an answer; ``times=None`` means forever. Faults
        are matched in the order they were added. Returns the :class:`Fault` (see ``.hits``)."""
        fault = Fault(method.upper(), re.compile(path_regex), status, times, delay, drop, action)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._down = None

    def set_down(self, down: bool = True, mode: str = "close") -> None:
        """Every request fails: ``mode="close"`` drops the connection, ``"503"`` answers 503."""
        if mode not in ("close", "503"):
            raise ValueError("mode must be 'close' or '503'")
        with self._lock:
            self._down = mode if down else None

    def count(self, method: str, path_regex: str = "") -> int:
        """How many requests that reached the front match ``method`` (or ``*``) and ``path_regex``."""
        pattern = re.compile(path_regex)
        with self._lock:
            return sum(1 for r in self.requests if method in ("*", r.method) and pattern.search(r.path))

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    # -- serving
    def _take(
        self, method: str, path: str, content_type: str | None
    ) -> tuple[RequestRecord, str | None, Fault | None]:
        record = RequestRecord(method, path, content_type)
        with self._lock:
            self.requests.append(record)
            fault = next(
                (f for f in self._faults if f.method in ("*", method) and f.pattern.search(path)), None
            )
            if fault is not None:
                fault.hits += 1
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
            return record, self._down, fault

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        record, down, fault = self._take(request.method, path, request.headers.get("Content-Type"))
        if down == "close" or (fault is not None and fault.drop and not fault.delay and not fault.action):
            return self._drop(request)
        if down == "503":
            record.status = 503
            return web.json_response(status_object(503, "the cluster is down (kubefront)"), status=503)
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.action is not None:
                await asyncio.get_running_loop().run_in_executor(None, fault.action)
            if fault.drop:
                return self._drop(request)
            if fault.status is not None:
                headers = {"Retry-After": "1"} if fault.status in (429, 503) else None
                body = status_object(fault.status, "injected by kubefront")
                record.status = fault.status
                return web.json_response(body, status=fault.status, headers=headers)
        return await self._forward(request, record)

    @staticmethod
    def _drop(request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        raise ConnectionResetError("dropped by kubefront")

    @staticmethod
    def _identity_headers(request: web.Request) -> list[tuple[str, str]]:
        """The user and groups of a verified client certificate, for the API server to believe (one
        X-Remote-Group header per group: the API server does not split a list)."""
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        if not peer:
            return []
        subject = [attr for rdn in peer.get("subject", ()) for attr in rdn]
        users = [("X-Remote-User", value) for key, value in subject if key == "commonName"]
        groups = [("X-Remote-Group", value) for key, value in subject if key == "organizationName"]
        return users[:1] + groups if users else []

    async def _forward(self, request: web.Request, record: RequestRecord) -> web.StreamResponse:
        assert self._session is not None
        headers = CIMultiDict(
            (k, v) for k, v in request.headers.items() if k.lower() not in HOP_HEADERS and not REMOTE.match(k)
        )
        identity = self._identity_headers(request)
        headers.extend(identity)
        body = await request.read()
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
            ssl=self._proxy_ssl if identity else self._plain_ssl,
            # a body without a Content-Type goes on without one: aiohttp would add octet-stream, which
            # the API server refuses (415); the official Python client sends its PUTs so
            skip_auto_headers=("Content-Type",),
        ) as upstream:
            record.status = upstream.status
            response = web.StreamResponse(status=upstream.status)
            for key, value in upstream.headers.items():
                if key.lower() not in HOP_HEADERS:
                    response.headers.add(key, value)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():  # a watch streams until either side ends
                await response.write(chunk)
            await response.write_eof()
            return response

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(
            auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None)
        )
        app = web.Application(client_max_size=16 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._server_ssl)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
