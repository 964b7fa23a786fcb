"""Many resolutions at once within the registries' deadline and the batch's (``batch``), and what
the client does with a registry held up (its breaker opens: the next batch does not ask it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tagpin.adapters.registry.batch import resolve_batch
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.http import Headers, HttpRequest, HttpResponse
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import RegistryError, RegistryUnavailable, Resolution

DIGEST = "sha256:" + "a" * 64
FAST = [ImageRef.parse(f"fast.example.com/app{i}:stable") for i in range(3)]
FROZEN = [ImageRef.parse(f"frozen.example.com/app{i}:stable") for i in range(2)]


def resolved(ref: ImageRef) -> Resolution:
    return Resolution(ref, DIGEST, "application/vnd.oci.image.index.v1+json", "HEAD")


def batch(
    refs: list[ImageRef],
    resolve: Callable[[ImageRef], Awaitable[Resolution]],
    *,
    registry_deadline: float,
    deadline: float | None = None,
) -> tuple[dict[ImageRef, Resolution | RegistryError], list[tuple[str, int]]]:
    told: list[tuple[str, int]] = []

    def held_up(registry: str, unanswered: int) -> str:
        told.append((registry, unanswered))
        return f"{registry}: held up"

    out = asyncio.run(
        resolve_batch(
            refs,
            resolve,
            lambda ref: ref.registry,
            held_up,
            deadline=deadline,
            registry_deadline=registry_deadline,
            clock=time.monotonic,
        )
    )
    return out, told


async def answer_or_hang(ref: ImageRef) -> Resolution:
    if ref.registry.startswith("frozen"):
        await asyncio.Event().wait()  # never set: a registry that never answers
    return resolved(ref)


def test_a_frozen_registry_is_cut_at_the_deadline_the_others_are_answered() -> None:
    out, told = batch(FAST + FROZEN, answer_or_hang, registry_deadline=0.2)
    assert all(isinstance(out[r], Resolution) for r in FAST)
    assert [str(out[r]) for r in FROZEN] == ["frozen.example.com: held up"] * 2
    assert told == [("frozen.example.com", 2)]  # once per registry


def test_a_registry_answering_steadily_is_not_cut_however_long_it_takes() -> None:
    one_at_a_time = asyncio.Lock()

    async def slow(ref: ImageRef) -> Resolution:
        async with one_at_a_time:
            await asyncio.sleep(0.05)
        return resolved(ref)

    refs = [ImageRef.parse(f"slow.example.com/app{i}:stable") for i in range(12)]  # 0.6 s in all
    out, told = batch(refs, slow, registry_deadline=0.2)
    assert told == [] and all(isinstance(out[r], Resolution) for r in refs)


def test_the_batch_deadline_leaves_the_rest_out_without_blaming_a_registry() -> None:
    out, told = batch(FAST + FROZEN, answer_or_hang, registry_deadline=30, deadline=time.monotonic() + 0.2)
    assert set(out) == set(FAST) and told == []


class Transport:
    """Answers fast.example.com at once; frozen.example.com never (until cancelled)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        self.sent.append(request.url)
        if "frozen" in request.url:
            await asyncio.Event().wait()
        return HttpResponse(200, Headers({"docker-content-digest": DIGEST}.items()), b"")

    async def close(self) -> None:
        pass


def test_a_held_up_registry_is_skipped_by_the_next_batch_until_the_cooldown() -> None:
    transport = Transport()
    with RegistryClient(transport=transport, registry_deadline=0.2, breaker_cooldown=60) as client:
        first = client.resolve_many(FAST + FROZEN)
        assert all(isinstance(first[r], Resolution) for r in FAST)
        message = "frozen.example.com: no answer for 0.2s (the registry's deadline in one poll)"
        assert all(message in str(first[r]) for r in FROZEN)
        asked = len([u for u in transport.sent if "frozen" in u])
        second = client.resolve_many(FAST + FROZEN)
    assert all(isinstance(second[r], Resolution) for r in FAST)
    assert all(isinstance(second[r], RegistryUnavailable) and "skipped" in str(second[r]) for r in FROZEN)
    assert len([u for u in transport.sent if "frozen" in u]) == asked  # not asked again
