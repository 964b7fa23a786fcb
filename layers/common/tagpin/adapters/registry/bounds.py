"""How many registry requests may be in flight: a bound per registry (``RegistryAccess.max_concurrency``,
else the client's ``per_registry``) under a global one (``max_concurrency``). A request takes its
registry's slot first, then a global one, so a registry waiting for its own slots holds none of the
global slots the others need.

A request may step aside (``Slot.step_aside``): it gives its global slot back and goes on, to its
answer or its timeout, on an allowance of as many slots again kept for such requests. ``batch``
steps aside the requests of a registry that has answered nothing for its deadline, so that frozen
registries cannot hold every global slot until their requests time out. When that allowance is
used up, a request keeps its global slot. In flight at most: ``2 x max_concurrency`` requests (the
transport's connection pool is sized for that).
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from tagpin.ports.registry import RegistryAccess


class Bounds:
    def __init__(self, max_concurrency: int, per_registry: int) -> None:
        self.max_concurrency = max_concurrency
        self._per_registry = per_registry
        # Created in the client's loop, on first use.
        self._global: asyncio.Semaphore | None = None
        self._hosts: dict[str, asyncio.Semaphore] = {}
        self.aside = 0  # requests in flight that gave their global slot back

    def hold(self, host: str, access: RegistryAccess) -> Slot:
        """A slot of ``host``'s and a global one, for an ``async with`` block."""
        if self._global is None:
            self._global = asyncio.Semaphore(self.max_concurrency)
        per_host = self._hosts.get(host)
        if per_host is None:
            per_host = self._hosts[host] = asyncio.Semaphore(access.max_concurrency or self._per_registry)
        return Slot(self, per_host, self._global)


class Slot:
    """One request's claim: its registry's slot and a global one (held, stepped aside, released)."""

    __slots__ = ("_bounds", "_global", "_per_host", "state")

    def __init__(self, bounds: Bounds, per_host: asyncio.Semaphore, overall: asyncio.Semaphore) -> None:
        self._bounds = bounds
        self._per_host = per_host
        self._global = overall
        self.state = "waiting"

    async def __aenter__(self) -> Slot:
        await self._per_host.acquire()
        try:
            await self._global.acquire()
        except BaseException:  # cancelled while waiting for a global slot
            self._per_host.release()
            raise
        self.state = "held"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
        self._per_host.release()

    def step_aside(self) -> None:
        """Give the global slot back and go on outside it, if the allowance for that has room."""
        if self.state == "held" and self._bounds.aside < self._bounds.max_concurrency:
            self._bounds.aside += 1
            self.state = "aside"
            self._global.release()

    def release(self) -> None:
        if self.state == "held":
            self._global.release()
        elif self.state == "aside":
            self._bounds.aside -= 1
        self.state = "released"
