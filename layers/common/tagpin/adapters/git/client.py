"""dulwich's HTTP client within a fetch's two budgets (tagpin.adapters.git.repositories sizes
them): the bytes it receives (``budget``: each answer read within what is left of it) and what the
pack it receives inflates to (``inflated``: the pack walked as it arrives, tagpin.adapters.git.packs).
Past either ``OverBudget`` or ``InflatedOverBudget``, before the bytes are kept or inflated; a
malformed pack ``BadPack``. Only Git's smart HTTP: a server that answers without its content type
(a repository served as static files, "dumb" HTTP) is refused, as dulwich would fetch and inflate
every object itself before any pack reached the walker. One client per operation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from dulwich.client import FetchPackResult, Urllib3HttpGitClient
from dulwich.errors import GitProtocolError

from tagpin.adapters.git.packs import PackWalker


class OverBudget(Exception):
    def __init__(self, budget: int) -> None:
        super().__init__(budget)
        self.budget = budget


class Client(Urllib3HttpGitClient):
    budget: int | None = None
    inflated: int | None = None
    received = 0

    def _http_request(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        data: bytes | Iterator[bytes] | None = None,
        raise_for_status: bool = True,
    ) -> tuple[Any, Callable[[int], bytes]]:
        resp, read = super()._http_request(url, headers, data, raise_for_status)
        budget = self.budget
        if budget is None:
            return resp, read

        def bounded(size: int = -1) -> bytes:
            left = budget - self.received
            chunk = read(left + 1 if size is None or size < 0 else min(size, left + 1))
            self.received += len(chunk)
            if self.received > budget:
                raise OverBudget(budget)
            return chunk

        return resp, bounded

    def _discover_references(self, *args: Any, **kw: Any) -> Any:
        found = super()._discover_references(*args, **kw)
        if self.dumb:
            raise GitProtocolError("the server does not speak Git's smart HTTP protocol (not supported)")
        return found

    def fetch_pack(
        self,
        path: str | bytes,
        determine_wants: Any,
        graph_walker: Any,
        pack_data: Callable[[bytes], int],
        *args: Any,
        **kw: Any,
    ) -> FetchPackResult:
        if self.inflated is None:
            return super().fetch_pack(path, determine_wants, graph_walker, pack_data, *args, **kw)
        walker = PackWalker(self.inflated)

        def walked(data: bytes) -> int:
            walker.feed(data)  # before dulwich keeps it: it inflates the pack once it is whole
            return pack_data(data)

        result = super().fetch_pack(path, determine_wants, graph_walker, walked, *args, **kw)
        walker.finish()
        return result
