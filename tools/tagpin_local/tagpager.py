"""A tag-list front for the local registry that paginates as the OCI distribution spec says.

Debian's docker-registry (distribution 2.8.2) ignores ``n`` and ``last`` on ``/v2/<name>/tags/list``
and answers every tag in one unsorted page without a Link. ``TagPager`` stands in front of it on
127.0.0.1 and serves the same tags the way a paginating registry does (distribution 3, the OCI
spec): lexical order, ``last`` exclusive, at most ``n`` a page (at most ``cap`` whatever ``n`` asks
for), and a relative ``Link: <...>; rel="next"`` while more remain; with ``link=False`` no Link, as
registries that paginate by ``last`` alone. Only tag lists are served (anything else is a 404). Each
repository's tags are read from the registry once and cached; ``requests`` records every path asked.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import threading
from itertools import pairwise
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlencode

import httpx
from aiohttp import web


def spec_page(
    tags: list[str], query: dict[str, str], path: str, *, cap: int | None = None, link: bool = True
) -> tuple[list[str], str | None]:
    """One page of ``tags`` for a request's ``n`` and ``last``: (the page, the next page's relative
    URL or None)."""
    ordered = tags if all(a <= b for a, b in pairwise(tags)) else sorted(tags)
    start = bisect.bisect_right(ordered, query["last"]) if "last" in query else 0
    n = int(query.get("n") or cap or len(ordered) or 1)
    n = min(n, cap) if cap else n
    chunk = ordered[start : start + n]
    more = link and start + n < len(ordered) and bool(chunk)
    return chunk, f"{path}?{urlencode({'n': n, 'last': chunk[-1]})}" if more else None


class TagPager:
    def __init__(self, upstream: str, *, cap: int | None = None, link: bool = True) -> None:
        self.upstream = upstream.rstrip("/")
        self.cap = cap
        self.link = link
        self.requests: list[str] = []
        self.port = 0
        self._tags: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tagpager", daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _upstream_tags(self, repository: str) -> list[str] | None:
        with self._lock:
            if repository in self._tags:
                return self._tags[repository]
        answer = httpx.get(f"{self.upstream}/v2/{repository}/tags/list", timeout=30.0)
        if answer.status_code != 200:
            return None
        tags = sorted(str(t) for t in answer.json().get("tags") or [])
        with self._lock:
            self._tags[repository] = tags
        return tags

    async def _handle(self, request: web.Request) -> web.Response:
        with self._lock:
            self.requests.append(request.path_qs)
        path = request.path
        if not (path.startswith("/v2/") and path.endswith("/tags/list")):
            return web.Response(status=404)
        repository = path[len("/v2/") : -len("/tags/list")]
        tags = await asyncio.to_thread(self._upstream_tags, repository)
        if tags is None:
            return web.json_response({"errors": [{"code": "NAME_UNKNOWN"}]}, status=404)
        query = {k: v for k, v in request.query.items()}
        chunk, target = spec_page(tags, query, path, cap=self.cap, link=self.link)
        headers = {"Link": f'<{target}>; rel="next"'} if target else {}
        body = json.dumps({"name": repository, "tags": chunk})
        return web.Response(text=body, content_type="application/json", headers=headers)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
