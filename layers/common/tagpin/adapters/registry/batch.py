"""Many resolutions at once (the poller's batches, ``RegistryClient.start_many``), within two
deadlines:

- the batch's (the caller's time budget): what is unresolved then is cancelled and left out, for
  the next run to start with;
- the registries': once no resolution of the batch has ended for ``registry_deadline`` seconds,
  the registries still unanswered (frozen: they accept connections and never answer) hold the
  batch no longer. Their tags get an error that says so, and ``held_up`` is told (the client opens
  their breakers, so that the next batches skip them until the cooldown instead of waiting
  again). Each resolution that ends, of any registry, restarts the wait: a registry that keeps
  answering, however slowly, is never cut, nor one whose requests wait for slots the others hold;
  a frozen registry holds a batch at most ``registry_deadline`` longer than the others do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import RegistryError, Resolution

Results = dict[ImageRef, Resolution | RegistryError]


async def resolve_batch(
    refs: list[ImageRef],
    resolve: Callable[[ImageRef], Awaitable[Resolution]],
    registry_of: Callable[[ImageRef], str],
    held_up: Callable[[str, int], str],
    *,
    deadline: float | None,
    registry_deadline: float,
    clock: Callable[[], float],
) -> Results:
    """Each ref's resolution or error; ``held_up(registry, unanswered)`` returns the error message
    for a registry's tags cut at its deadline."""
    out: Results = {}

    async def one(ref: ImageRef) -> None:
        try:
            out[ref] = await resolve(ref)
        except RegistryError as exc:
            out[ref] = exc
        except Exception as exc:  # a bug or an odd answer must not lose the other tags
            out[ref] = RegistryError(f"{ref.registry}: {type(exc).__name__}: {exc}", host=ref.registry)

    tasks: dict[asyncio.Future[None], ImageRef] = {asyncio.ensure_future(one(ref)): ref for ref in refs}
    pending: set[asyncio.Future[None]] = set(tasks)
    while pending:
        left = None if deadline is None else deadline - clock()
        if left is not None and left <= 0:
            break  # the batch's deadline: left out
        cut = left is None or left > registry_deadline  # this wait ends at the registries' deadline
        window = registry_deadline if left is None or cut else left
        done, pending = await asyncio.wait(pending, timeout=window, return_when=asyncio.FIRST_COMPLETED)
        if done:
            continue
        if cut:  # nothing answered for the registries' deadline
            unanswered: dict[str, list[ImageRef]] = {}
            for task in pending:
                unanswered.setdefault(registry_of(tasks[task]), []).append(tasks[task])
            for registry, held in unanswered.items():
                message = held_up(registry, len(held))
                out.update((ref, RegistryError(message, host=registry)) for ref in held)
        break  # else the batch's deadline has come: the rest is left out
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    return out
