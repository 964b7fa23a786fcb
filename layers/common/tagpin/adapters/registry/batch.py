"""Many resolutions at once (the poller's batches, ``RegistryClient.start_many``), within two bounds:

- the batch's deadline (the caller's time budget): what is unresolved then, asked or not, is
  cancelled and left out, for the next run to start with. Nobody is blamed for it;
- each registry's, from its own progress in the batch (``Progress``). A registry is asked when one
  of its requests is past the concurrency bounds (a request waiting for a slot has not been asked)
  and has answered once any HTTP response came from it (any status: a 429 or a 500 is an answer;
  a token server's is not the registry's). A registry that has answered nothing ``registry_deadline``
  seconds after it was first asked is silent:

  - its requests step aside (``bounds``): they give their global slots back, so that frozen
    registries cannot keep the others' requests waiting until their own time out;
  - its next request timeout is final (``Progress.timed_out``): not retried, the registry is cut
    from the batch. Its breaker opens for the cooldown (the next batches skip it), its requests are
    cancelled, and its tags get that error (``RegistrySilent``); one that was still waiting for a
    slot may find the breaker open first and be skipped, with that error as the last.

  A registry that has answered anything in the batch is never cut nor stepped aside, however slowly
  it answers: its requests are bounded by their own timeout and retries, its breaker counts its
  failures. Nothing tells a frozen registry from a slow one before a request's timeout, so that is
  where a silent one is cut: a frozen registry holds a batch until the first of its requests'
  timeouts after the deadline (with the defaults, 5 s and 10 s: its first request's timeout, not
  its three tries), and holds no global slot after the deadline.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from tagpin.adapters.registry.bounds import Slot
from tagpin.adapters.registry.resilience import CircuitBreaker
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import RegistryAccess, RegistryError, RegistryUnavailable, Resolution

log = logging.getLogger(__name__)

Results = dict[ImageRef, Resolution | RegistryError]


class RegistrySilent(RegistryUnavailable):
    """The registry answered nothing in this batch and a request timed out: it is cut from the
    batch and skipped until its breaker's cooldown has passed."""


def accesses_for(
    refs: Iterable[ImageRef], access: Callable[[str], RegistryAccess]
) -> dict[str, RegistryAccess | RegistryError]:
    """Each registry's access, read in the caller's thread (a secret or an ECR token may block);
    one registry's bad credentials fail only its own tags."""
    found: dict[str, RegistryAccess | RegistryError] = {}
    for registry in {r.registry for r in refs}:
        try:
            found[registry] = access(registry)
        except Exception as exc:
            found[registry] = RegistryError(
                f"{registry}: credentials unavailable ({type(exc).__name__}: {exc})", host=registry
            )
    return found


@dataclass
class _Registry:
    """One registry's progress in one batch."""

    answered: bool = False
    silent: bool = False
    timer: asyncio.TimerHandle | None = None
    in_flight: set[Slot] = field(default_factory=set)


def _addressed_to(url: str, host: str) -> bool:
    """Whether ``url``'s host (and port) is ``host`` (``urlsplit`` would cost more than the rest of
    the bookkeeping of a request)."""
    start = url.find("://") + 3
    end = start + len(host)
    return url.startswith(host, start) and (len(url) == end or url[end] in "/?#")


class _Asked:
    """A request in flight, in its registry's set while it runs."""

    __slots__ = ("_in_flight", "_slot")

    def __init__(self, in_flight: set[Slot], slot: Slot) -> None:
        self._in_flight, self._slot = in_flight, slot

    def __enter__(self) -> None:
        self._in_flight.add(self._slot)

    def __exit__(self, *_exc: object) -> None:
        self._in_flight.discard(self._slot)


_NOTHING = nullcontext()


class Progress:
    """One batch's progress with each registry (by API host). The client reports to the batch it
    runs in through the class methods, which do nothing outside a batch."""

    _current: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
        "tagpin_registry_batch", default=None
    )

    def __init__(self, registry_deadline: float) -> None:
        self._deadline = registry_deadline
        self._loop = asyncio.get_running_loop()
        self._registries: dict[str, _Registry] = {}
        self.cuts: dict[str, str] = {}  # host -> the error its tags get
        self.cut_signal: asyncio.Future[None] = self._loop.create_future()

    def _registry(self, host: str) -> _Registry:
        found = self._registries.get(host)
        if found is None:
            found = self._registries[host] = _Registry()
        return found

    @classmethod
    def asking(cls, host: str, slot: Slot) -> AbstractContextManager[object]:
        """Around a request of ``host``'s past the bounds: asked, until it ends."""
        progress = cls._current.get()
        if progress is None:
            return _NOTHING
        registry = progress._registry(host)
        if registry.timer is None and not registry.answered:  # first asked: the deadline starts
            registry.timer = progress._loop.call_later(progress._deadline, progress._deadline_passed, host)
        if registry.silent:
            slot.step_aside()
        return _Asked(registry.in_flight, slot)

    @classmethod
    def answered(cls, host: str, url: str) -> None:
        """An HTTP response to ``url`` came, for ``host``: an answer if ``url`` is on ``host`` (a
        token server's is not the registry's)."""
        progress = cls._current.get()
        if progress is not None and _addressed_to(url, host):
            registry = progress._registry(host)
            registry.answered, registry.silent = True, False
            if registry.timer is not None:
                registry.timer.cancel()

    @classmethod
    def timed_out(cls, host: str, breaker: CircuitBreaker, timeout: float) -> None:
        """A request to ``host`` timed out: if the registry is silent, raise ``RegistrySilent``
        (not retried) and cut it, opening its breaker once; else nothing (the caller retries)."""
        progress = cls._current.get()
        if progress is None or not progress._registry(host).silent:
            return
        message = progress.cuts.get(host)
        if message is None:
            message = (
                f"{host}: no answer to any request in this poll (a request timed out after {timeout:g}s); "
                f"skipped for {breaker.cooldown:g}s, then tried again"
            )
            breaker.failure(message, open_for=breaker.cooldown)
            progress.cuts[host] = message
            if not progress.cut_signal.done():
                progress.cut_signal.set_result(None)
        raise RegistrySilent(message, host=host)

    def _deadline_passed(self, host: str) -> None:
        registry = self._registries[host]
        if not registry.answered:
            registry.silent = True
            for slot in registry.in_flight:
                slot.step_aside()

    def take_cuts(self) -> dict[str, str]:
        cuts, self.cuts = self.cuts, {}
        if self.cut_signal.done():
            self.cut_signal = self._loop.create_future()
        return cuts

    def close(self) -> None:
        for registry in self._registries.values():
            if registry.timer is not None:
                registry.timer.cancel()


async def resolve_batch(
    refs: list[ImageRef],
    accesses: Mapping[str, RegistryAccess | RegistryError],
    resolve: Callable[[ImageRef, RegistryAccess], Awaitable[Resolution]],
    registry_of: Callable[[ImageRef], str],
    *,
    deadline: float | None,
    registry_deadline: float,
    clock: Callable[[], float],
) -> Results:
    """Each ref's resolution or error; refs unresolved at ``deadline`` (a ``clock`` value) are left out."""
    out: Results = {}
    reachable: dict[ImageRef, RegistryAccess] = {}
    for ref in refs:
        access = accesses[ref.registry]
        if isinstance(access, RegistryError):
            out[ref] = access
        else:
            reachable[ref] = access

    async def one(ref: ImageRef) -> None:
        try:
            out[ref] = await resolve(ref, reachable[ref])
        except RegistryError as exc:
            out[ref] = exc
        except Exception as exc:  # a bug or an odd answer must not lose the other tags
            out[ref] = RegistryError(f"{ref.registry}: {type(exc).__name__}: {exc}", host=ref.registry)

    progress = Progress(registry_deadline)
    token = Progress._current.set(progress)
    try:  # each task runs in a copy of this context: it reports to ``progress``
        tasks = {ref: asyncio.ensure_future(one(ref)) for ref in reachable}
    finally:
        Progress._current.reset(token)
    by_registry: dict[str, list[ImageRef]] = {}
    for ref in tasks:
        by_registry.setdefault(registry_of(ref), []).append(ref)
    everything = asyncio.gather(*tasks.values(), return_exceptions=True)
    try:
        while not everything.done():
            left = None if deadline is None else deadline - clock()
            if left is not None and left <= 0:
                break  # the batch's deadline: the rest is left out
            waiting: set[asyncio.Future[Any]] = {everything, progress.cut_signal}
            done, _ = await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            for host, message in progress.take_cuts().items():
                held = [ref for ref in by_registry.get(host, ()) if not tasks[ref].done()]
                log.warning("registry cut from a poll", extra={"registry": host, "unanswered": len(held)})
                for ref in held:
                    tasks[ref].cancel()
                    out[ref] = RegistrySilent(message, host=host)
            if not done:
                break  # the batch's deadline has come
    finally:
        progress.close()
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
    return out
