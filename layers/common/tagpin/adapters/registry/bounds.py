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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tagpin.ports.registry import RegistryAccess


class Bounds:
    def __init__(self, max_concurrency: int, per_registry: int) -> None:
        self.max_concurrency = max_concurrency
        self._per_registry = per_registry
        # Created in the client's loop, on first use.
        self._global: asyncio.Semaphore | None = None
        self._hosts: dict[str, asyncio.Semaphore] = {}
        self.aside = 0  # requests in flight that gave their global slot back

    @asynccontextmanager
    async def hold(self, host: str, access: RegistryAccess) -> AsyncIterator[Slot]:
        """A slot of ``host``'s and a global one, for the ``async with`` block."""
        if self._global is None:
            self._global = asyncio.Semaphore(self.max_concurrency)
        per_host = self._hosts.get(host)
        if per_host is None:
            per_host = self._hosts[host] = asyncio.Semaphore(access.max_concurrency or self._per_registry)
        async with per_host:
            await self._global.acquire()
            slot = Slot(self, self._global)
            try:
                yield slot
            finally:
                slot.release()


class Slot:
    """One request's claim on the global bound: held, stepped aside, or released."""

    def __init__(self, bounds: Bounds, overall: asyncio.Semaphore) -> None:
        self._bounds = bounds
        self._global = overall
        self.state = "held"

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
