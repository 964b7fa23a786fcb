"""The registry client's concurrency bounds (``bounds``): a registry's slots, then a global one, and
requests that step aside (give their global slot back) on an allowance of as many again."""

from __future__ import annotations

import asyncio

from tagpin.adapters.registry.bounds import Bounds, Slot
from tagpin.ports.registry import RegistryAccess


def test_a_request_stepping_aside_frees_its_global_slot_within_the_allowance() -> None:
    async def scenario() -> list[str]:
        bounds = Bounds(max_concurrency=2, per_registry=2)
        seen: list[str] = []
        first: list[Slot] = []
        held = asyncio.Event()
        done = asyncio.Event()
        fast_in = asyncio.Event()

        async def hold(host: str, name: str, keep: asyncio.Event) -> None:
            async with bounds.hold(host, RegistryAccess()) as slot:
                seen.append(name)
                first.append(slot)
                if name == "fast":
                    fast_in.set()
                if len(first) == 2:
                    held.set()
                await keep.wait()

        frozen = [asyncio.ensure_future(hold("frozen", f"frozen{i}", asyncio.Event())) for i in range(2)]
        await held.wait()
        late = asyncio.ensure_future(hold("fast", "fast", done))
        await asyncio.sleep(0.01)
        seen.append(f"waiting:{not late.done() and 'fast' not in seen}")
        for slot in first:
            slot.step_aside()
        # the late request takes the freed global slot (however many loop turns that takes: a fixed
        # sleep was a guess at how many run in 10 ms on a busy machine); never: a TimeoutError
        await asyncio.wait_for(fast_in.wait(), 30)
        seen.append(f"aside:{bounds.aside}")
        first[2].step_aside()  # the allowance (2) is used up: it keeps its global slot
        seen.append(f"kept:{first[2].state}")
        done.set()
        await late
        for task in frozen:
            task.cancel()
        await asyncio.gather(*frozen, return_exceptions=True)
        seen.append(f"after:{bounds.aside}")
        return seen

    assert asyncio.run(scenario()) == [
        "frozen0",
        "frozen1",
        "waiting:True",
        "fast",
        "aside:2",
        "kept:held",
        "after:0",
    ]
