"""A fault-injecting HTTP proxy in front of a real registry (tests and the latency benchmark).

Forwards every request to ``upstream`` unless a configured fault matches it first:
``status`` (e.g. 429 with Retry-After, 500), ``reset`` (the connection is dropped with no
answer), ``hang`` (no answer for ``seconds``, so the client times out), ``delay`` (answered
after ``seconds``). A fault applies to requests whose path contains ``match``, ``times`` times
(None: always). ``latency`` delays every request (the benchmark's injected latency).

``HangingServer`` is a frozen registry: it accepts every TCP connection and never reads from it
nor answers (what a registry behind a stuck load balancer does), until it is stopped.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import aiohttp
from aiohttp import web

HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})


@dataclass
class Fault:
    kind: Literal["status", "reset", "hang", "delay"]
    status: int = 500
    headers: dict[str, str] | None = None  # e.g. {"Retry-After": "1"}
    seconds: float = 0.0
    times: int | None = None
    match: str = ""


class FaultProxy:
    def __init__(self, upstream: str, latency: float = 0.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.latency = latency
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, str]] = []  # (method, path, what happened)
        self.port = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="faultproxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def add(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.requests.clear()

    def seen(self, what: str | None = None) -> list[tuple[str, str, str]]:
        with self._lock:
            return [r for r in self.requests if what is None or r[2] == what]

    def _take(self, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.match in path and (fault.times is None or fault.times > 0):
                    if fault.times is not None:
                        fault.times -= 1
                    return fault
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self._take(request.path_qs)
        what = fault.kind if fault else "forward"
        with self._lock:
            self.requests.append((request.method, request.path_qs, what))
        if self.latency:
            await asyncio.sleep(self.latency)
        if fault is not None:
            if fault.kind == "status":
                return web.Response(status=fault.status, headers=fault.headers or {}, text='{"errors":[]}')
            if fault.kind == "reset":
                if request.transport is not None:
                    request.transport.abort()
                raise ConnectionResetError("injected reset")
            await asyncio.sleep(fault.seconds)  # hang or delay, then answer normally
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        body = await request.read()
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
        ) as upstream:
            payload = await upstream.read()
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS}
            if request.method == "HEAD":
                response = web.Response(status=upstream.status, headers=out)
                if "Content-Length" in upstream.headers:
                    response.headers["Content-Length"] = upstream.headers["Content-Length"]
                return response
            return web.Response(status=upstream.status, headers=out, body=payload)

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
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
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class HangingServer:
    """Accepts connections on 127.0.0.1 and holds them open, silent (``accepted`` counts them)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.settimeout(0.1)  # accept() wakes up to see whether it was stopped
        self.port: int = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="hanging-server", daemon=True)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def accepted(self) -> int:
        return len(self._held)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:  # the listener was closed: stopping
                return
            self._held.append(conn)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self._listener.close()
        for conn in self._held:
            conn.close()
