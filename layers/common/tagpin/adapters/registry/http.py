"""HTTP for the registry client: the transport it sends through and the event-loop thread that owns
all I/O.

- one asyncio event loop in a daemon thread (``LoopThread``) owns all I/O; ``RegistryClient``'s
  synchronous API submits coroutines to it, so every call shares one connection pool (kept alive
  across warm Lambda invocations);
- the HTTP stack is aiohttp. Measured on the local registry (2 cores, 32 concurrent HEADs, CPU
  time per request in the client): ``httpx.AsyncClient`` 1.3 ms, httpx sync in threads 0.66 ms,
  urllib3 in threads 0.30 ms, httpx over an aiohttp transport 0.33 ms, aiohttp 0.13 ms. httpx's
  async pool (httpcore 1.0.9) re-checks every pooled connection (``has_expired`` ->
  ``is_readable``, a socket poll) each time it assigns a request, and takes an anyio lock that
  yields to the loop on every acquire: 2,000 HEADs cost 160,894 ``has_expired`` calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, Self

# --- transport ------------------------------------------------------------------------------------


class CaseInsensitiveView(Protocol):
    """What ``Headers`` reads of a transport's own case-insensitive multi-dict (aiohttp's
    ``CIMultiDictProxy``)."""

    def get(self, key: str, default: str, /) -> str: ...

    def getall(self, key: str, default: list[str], /) -> list[str]: ...

    def __contains__(self, key: object, /) -> bool: ...


class Headers:
    """Case-insensitive, multi-valued response headers. Built from pairs (indexed once by lowered
    name: each response's are read a few times), or over a transport's own case-insensitive
    multi-dict (``view``: aiohttp has parsed and indexed them already, in C; copying them cost
    more than every read of them)."""

    __slots__ = ("_by_name", "_view")

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._view: CaseInsensitiveView | None = None
        self._by_name: dict[str, list[str]] = {}
        for k, v in items:
            self._by_name.setdefault(k.lower(), []).append(v)

    @classmethod
    def view(cls, headers: CaseInsensitiveView) -> Headers:
        found = cls()
        found._view = headers
        return found

    def get(self, name: str, default: str = "") -> str:
        if self._view is not None:
            return self._view.get(name, default)
        found = self._by_name.get(name.lower())
        return found[0] if found else default

    def get_list(self, name: str) -> list[str]:
        if self._view is not None:
            return list(self._view.getall(name, []))
        return list(self._by_name.get(name.lower(), ()))

    def __contains__(self, name: object) -> bool:
        if self._view is not None:
            return isinstance(name, str) and name in self._view
        return isinstance(name, str) and name.lower() in self._by_name


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: Mapping[str, str]
    params: Mapping[str, str] = field(default_factory=dict)
    # None: the body exactly as sent, however long. A number: a document (a manifest, a tag list,
    # a token) whose Content-Encoding the transport decodes (a manifest's digest is over its
    # decoded bytes), and which it refuses (``BodyTooLarge``) once the decoded body passes that
    # many bytes.
    max_body: int | None = None


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: Headers
    body: bytes = b""

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type").split(";", 1)[0].strip().lower()


class TransportError(Exception):
    """No HTTP answer: connection refused or reset, or a timeout (``timeout`` True)."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class BodyTooLarge(Exception):
    """The decoded body passed ``HttpRequest.max_body`` bytes (not retried: it would again)."""

    def __init__(self, limit: int, status: int) -> None:
        super().__init__(f"HTTP {status} response body over {limit} bytes")
        self.limit = limit
        self.status = status


class RequestMeter:
    """Counts the HTTP requests sent (retries included) by the coroutine that enters it and the tasks
    that coroutine starts (a token fetch): ``with RequestMeter() as meter: ...; meter.count``. The
    client's ``_send`` calls ``note`` for each request it hands to the transport."""

    _current: contextvars.ContextVar[RequestMeter | None] = contextvars.ContextVar(
        "tagpin_registry_meter", default=None
    )

    def __init__(self) -> None:
        self.count = 0
        self._token: contextvars.Token[RequestMeter | None] | None = None

    def __enter__(self) -> Self:
        self._token = self._current.set(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            self._current.reset(self._token)
            self._token = None

    @classmethod
    def note(cls) -> None:
        meter = cls._current.get()
        if meter is not None:
            meter.count += 1


class Transport(Protocol):
    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse: ...

    async def close(self) -> None: ...


# URLs kept parsed (``AiohttpTransport``): about 0.8 KB each, 16 MB at the most.
PARSED_URLS = 20_000


class AiohttpTransport:
    """The production transport: one aiohttp session (keep-alive pool) created in the loop.

    Each URL is parsed (``yarl.URL``) once and kept, up to ``PARSED_URLS`` (then they are all
    dropped and parsed again): a warm container's polls ask for the same manifests every time, and
    parsing one, with what aiohttp reads of it, cost 6 µs of a request's CPU (yarl's own cache of
    encoded URLs holds 128)."""

    def __init__(self, limit: int = 100, keepalive_timeout: float = 30.0) -> None:
        self._limit = limit
        self._keepalive = keepalive_timeout
        self._session: Any = None
        self._timeouts: dict[float, Any] = {}  # seconds -> aiohttp.ClientTimeout (one per value)
        self._urls: dict[str, Any] = {}  # text -> yarl.URL

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        import aiohttp
        import yarl

        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limit, keepalive_timeout=self._keepalive, ttl_dns_cache=300
            )
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        client_timeout = self._timeouts.get(timeout)
        if client_timeout is None:
            client_timeout = self._timeouts[timeout] = aiohttp.ClientTimeout(total=timeout)
        url = self._urls.get(request.url)
        if url is None:
            if len(self._urls) >= PARSED_URLS:
                self._urls.clear()
            url = self._urls[request.url] = yarl.URL(request.url)
        try:
            async with self._session.request(
                request.method,
                url,
                headers=request.headers,
                params=request.params or None,
                timeout=client_timeout,
                allow_redirects=True,
                auto_decompress=request.max_body is not None,
            ) as response:
                if request.method == "HEAD":
                    body = b""
                elif request.max_body is None:
                    body = await response.read()
                else:
                    body = await self._read_bounded(response, request.max_body)
                return HttpResponse(response.status, Headers.view(response.headers), body)
        except TimeoutError:
            raise TransportError(f"timed out after {timeout:.1f}s", timeout=True) from None
        except aiohttp.ClientError as exc:
            raise TransportError(type(exc).__name__) from None

    @staticmethod
    async def _read_bounded(response: Any, limit: int) -> bytes:
        """The decoded body, refused as soon as it passes ``limit`` bytes (never held whole)."""
        if response.headers.get("Content-Encoding", "").strip().lower() in ("", "identity"):
            length = response.content_length
            if length is not None and length > limit:
                raise BodyTooLarge(limit, response.status)
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(limit, response.status)
            chunks.append(chunk)
        return b"".join(chunks)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


# --- the event loop -------------------------------------------------------------------------------


def eager_task(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
    """The loop's task factory: a task runs its first step as it is created (``eager_start``), up
    to its first wait, instead of from the loop's queue after everything queued before it. A batch
    creates one task per tag (``batch``): the first requests were written only once every task of
    the chunks submitted with it had been created (500 at a poll's start: 6-60 ms before its first
    request, on 2 shared cores); now each is written as its task is created, and a task that waits
    for a slot costs no turn of the loop to get there. uvloop's ``create_task`` takes no
    ``eager_start`` itself (``asyncio.eager_task_factory`` fails in it), hence this factory."""
    kwargs.pop("eager_start", None)
    return asyncio.Task(coro, loop=loop, eager_start=True, **kwargs)


class LoopThread:
    """An event loop running in a daemon thread: uvloop's (libuv, in C). A steady poll's CPU is
    mostly the event loop's and aiohttp's per request: asyncio's own loop, in Python, cost about 8%
    more of the poller's CPU per tag (bench/poll.py's resolution of 10,000 tags, back to back).
    Its tasks start eagerly (``eager_task``)."""

    def __init__(self) -> None:
        import uvloop  # imported with the first loop: the registry client's first request

        self.loop = uvloop.new_event_loop()
        self.loop.set_task_factory(eager_task)
        self.thread = threading.Thread(target=self.loop.run_forever, name="tagpin-registry", daemon=True)
        self.thread.start()

    def submit[T](self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        async def run() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(run(), self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.loop.close()
