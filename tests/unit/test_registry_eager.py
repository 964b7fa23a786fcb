"""The registry client's loop starts its tasks eagerly (``http.eager_task``): a batch's first
request is written as its task is created, not once every task of the batch (and of the batches
submitted with it) exists. What a person polling many tags sees: the registry is asked at once,
the answers are the same."""

from __future__ import annotations

import asyncio
import threading

from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.http import Headers, HttpRequest, HttpResponse
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import RegistryAccess, Resolution

DIGEST = "sha256:" + "b" * 64
TAGS = 200


class Counting:
    """Answers every HEAD with ``DIGEST``; notes how many tasks the loop held when the first
    request was written, and holds every answer until ``release`` (so that no task ends early)."""

    def __init__(self) -> None:
        self.tasks_at_first: int | None = None
        self.sent = 0
        self.release = threading.Event()

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        if self.tasks_at_first is None:
            self.tasks_at_first = len(asyncio.all_tasks())
        self.sent += 1
        while not self.release.is_set():
            await asyncio.sleep(0.005)
        return HttpResponse(200, Headers({"docker-content-digest": DIGEST}.items()), b"")

    async def close(self) -> None:
        pass


def refs(n: int) -> list[ImageRef]:
    return [ImageRef.parse(f"registry.test/app{i}:stable") for i in range(n)]


def test_a_batch_asks_the_registry_before_creating_every_tag_s_task() -> None:
    transport = Counting()
    tags = refs(TAGS)
    with RegistryClient(lambda _h: RegistryAccess(), transport=transport, per_registry=4) as client:
        first = client.start_many(tags[: TAGS // 2])
        second = client.start_many(tags[TAGS // 2 :])  # submitted at once, as the poll's chunks
        while transport.sent < 4:  # the registry's bound: 4 asked, the others wait for a slot
            threading.Event().wait(0.005)
        transport.release.set()
        answers = {**first.result(timeout=30), **second.result(timeout=30)}
    # the first request went out with the first tag's task: not after the 200 tasks of both batches
    assert transport.tasks_at_first is not None and transport.tasks_at_first < 10, transport.tasks_at_first
    assert set(answers) == set(tags)
    assert all(isinstance(a, Resolution) and a.digest == DIGEST for a in answers.values())


def test_a_coroutine_submitted_to_the_loop_runs_to_its_first_wait_as_it_is_submitted() -> None:
    transport = Counting()
    transport.release.set()
    with RegistryClient(lambda _h: RegistryAccess(), transport=transport) as client:
        loop = client._run_loop()
        steps: list[str] = []

        async def child() -> None:
            steps.append("child started")
            await asyncio.sleep(0)

        async def parent() -> list[str]:
            task = asyncio.ensure_future(child())
            steps.append("task created")
            await task
            return steps

        assert loop.submit(parent()).result(timeout=10) == ["child started", "task created"]
