"""Faults between tagpin and the real registry (the fault proxy): 429 + Retry-After, 500, resets,
timeouts, slow answers. Every change is enqueued exactly once, nothing crashes, and a failing
registry does not hold up the others beyond its own bound."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.resilience import RetryPolicy
from tagpin.domain.config import FollowedImage, Registry, Target
from tagpin.domain.poll_pass import PollPass
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import RegistryAccess, RegistryError, RegistryUnavailable
from tagpin.ports.state import State
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller
from tagpin_local.faultproxy import Fault, FaultProxy, HangingServer
from tagpin_local.oci import push_image
from tagpin_local.registry_server import RegistryServer

from tests.conftest import require_binary
from tests.support.queues import ListQueue

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryServer]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with RegistryServer() as server:
        yield server


@pytest.fixture
def proxy(registry: RegistryServer) -> Iterator[FaultProxy]:
    with FaultProxy(registry.url) as p:
        yield p


def client(**kw: Any) -> RegistryClient:
    kw.setdefault("timeout", 0.5)
    kw.setdefault("retry", RetryPolicy(attempts=3, base=0.01, cap=0.05, max_retry_after=2))
    return RegistryClient(access=lambda _h: RegistryAccess(insecure=True), **kw)


def followed(host: str, names: list[str]) -> list[FollowedImage]:
    return [
        FollowedImage(
            image=f"{host}/faults/{n}:stable", targets=[Target(cluster="c", name=n, container="app")]
        )
        for n in names
    ]


def test_proxy_forwards_and_injects(registry: RegistryServer, proxy: FaultProxy) -> None:
    digest = push_image(registry.url, "faults/plain", "v1")
    ref = ImageRef.parse(f"{proxy.host}/faults/plain:v1")
    proxy.add(Fault("status", 429, {"Retry-After": "1"}, times=1), Fault("status", 500, times=1))
    proxy.add(Fault("reset", times=1), Fault("hang", seconds=2, times=1))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    with client(retry=RetryPolicy(attempts=5, base=0.01, cap=0.05), sleep=sleep) as c:
        assert c.resolve(ref).digest == digest
    assert [w for _m, _p, w in proxy.seen()] == ["status", "status", "reset", "hang", "forward"]
    assert waits[0] >= 1.0  # Retry-After honoured


def test_every_change_enqueued_exactly_once_under_faults(
    registry: RegistryServer, proxy: FaultProxy, state: State
) -> None:
    names = [f"app{i}" for i in range(12)]
    for n in names:
        push_image(registry.url, f"faults/{n}", "stable")
    items = followed(proxy.host, names)
    queue = ListQueue()
    # Flaky on the first requests of some tags, then fine: retries absorb it within the run.
    proxy.add(
        Fault("status", 503, match="app1/", times=2),
        Fault("reset", match="app2/", times=1),
        Fault("status", 429, {"Retry-After": "0"}, match="app3/", times=2),
        Fault("hang", seconds=1.0, match="app4/", times=1),
        Fault("delay", seconds=0.2, match="app5/"),
    )
    with client() as c:
        poller = Poller(Detector(c, state, queue), c, state, lambda _h: Registry(insecure=True))
        first = poller.run(items)
        assert (first.errors, first.changed, first.enqueued) == (0, 12, 12)
        # A tag moves; the registry then fails hard for one of the others: that one keeps its digest.
        moved = push_image(registry.url, "faults/app7", "stable")
        proxy.add(Fault("status", 500, match="app9/"))
        second = poller.run(items)
        assert (second.errors, second.changed) == (1, 1)
        assert state.tags.get(f"{proxy.host}/faults/app9:stable").last_error  # type: ignore[union-attr]
        proxy.clear()
        third = poller.run(items)
        assert third.errors == 0
    sent = [(ch.move.image, ch.move.digest) for ch in queue.sent]
    # Every target is still "behind" (no consumer here), so the level check re-enqueues them each
    # run; the FIFO queue's dedup id (image + digest) makes those one message. Distinct changes:
    assert len(set(sent)) == 13
    assert (f"{proxy.host}/faults/app7:stable", moved) in set(sent)


def test_failing_registry_is_skipped_and_does_not_hold_up_the_others(
    registry: RegistryServer, proxy: FaultProxy, state: State
) -> None:
    names = [f"svc{i}" for i in range(40)]
    for n in names[:2]:
        push_image(registry.url, f"faults/{n}", "stable", content=b"same")
    for n in names[2:]:  # the same manifest under many tags
        push_image(registry.url, f"faults/{n}", "stable", content=b"same")
    slow = followed(proxy.host, names)  # every request through the proxy hangs
    healthy = followed(registry.host, names)
    proxy.add(Fault("hang", seconds=5))
    queue = ListQueue()

    def access(host: str) -> RegistryAccess:
        return RegistryAccess(insecure=True, max_concurrency=4 if host == proxy.host else None)

    with RegistryClient(
        access=access,
        timeout=0.5,
        retry=RetryPolicy(attempts=2, base=0.01, cap=0.02),
        breaker_threshold=3,
    ) as c:
        poller = Poller(Detector(c, state, queue), c, state, lambda _h: Registry(insecure=True))
        started = time.monotonic()
        summary = poller.run(slow + healthy)
        elapsed = time.monotonic() - started
    assert summary.resolved == 80
    assert summary.errors == 40 and summary.changed == 40
    assert {ch.move.image for ch in queue.sent} == {f.image for f in healthy}
    errors = [r.error or "" for r in summary.results if r.outcome == "error"]
    assert sum("skipped" in e for e in errors) >= 30  # the circuit opened after the first few
    # Bounded: a few rounds of 4 timed-out requests (2 attempts x 0.5 s), not 40 x 1 s.
    assert elapsed < 15
    assert isinstance(RegistryUnavailable("x", host="h"), RegistryError)


def test_time_budget_cursor_continues_next_run(
    registry: RegistryServer, proxy: FaultProxy, state: State
) -> None:
    names = [f"budget{i:02d}" for i in range(20)]
    for n in names:
        push_image(registry.url, f"faults/{n}", "stable", content=b"budget")
    items = followed(proxy.host, names)
    proxy.add(Fault("delay", seconds=0.3))  # every request slow
    queue = ListQueue()
    with client(timeout=5.0, max_concurrency=2, per_registry=2) as c:
        poller = Poller(
            Detector(c, state, queue),
            c,
            state,
            lambda _h: Registry(insecure=True),
            chunk=4,
            reserve_seconds=0,
        )
        first = poller.run(items, remaining_ms=lambda: 1200)
        assert first.cursor is not None and first.not_reached > 0
        assert state.cursor.get().cursor == first.cursor
        seen_first = {r.image for r in first.results}
        proxy.clear()
        second = poller.run(items, remaining_ms=lambda: 60_000)
    assert second.cursor is None and state.cursor.get() == PollPass()
    assert second.results[0].image == first.cursor  # the next run starts where the last stopped
    assert seen_first | {r.image for r in second.results} == {f.image for f in items}


def test_a_frozen_registry_holds_a_poll_no_longer_than_one_request_timeout(
    registry: RegistryServer, state: State
) -> None:
    """A registry that accepts connections and never answers (a real TCP server that stays silent),
    beside the real registry, with the client's defaults (10 s timeout, 3 tries, breaker of 5, 5 s
    deadline): within a budget shorter than one frozen request's tries (20 s < 3 x 10 s), the run
    polls the other registry's tags and ends with the frozen tags recorded as errors (cut at the
    first timeout, not retried), none left unreached.
    The next run skips the frozen registry (no new connection) and still polls the other; once the
    cooldown has passed the frozen registry is tried again."""
    names = [f"beside{i}" for i in range(6)]
    for n in names:
        push_image(registry.url, f"faults/{n}", "stable")
    skew = [0.0]  # the clock's offset: the breaker's cooldown passes without waiting for it

    def clock() -> float:
        return time.monotonic() + skew[0]

    with (
        HangingServer() as frozen,
        RegistryClient(access=lambda _h: RegistryAccess(insecure=True), clock=clock) as c,
    ):
        healthy, stuck = followed(registry.host, names), followed(frozen.host, ["stuck0", "stuck1"])
        queue = ListQueue()
        poller = Poller(
            Detector(c, state, queue),
            c,
            state,
            lambda _h: Registry(insecure=True),
            monotonic=clock,
            reserve_seconds=0,
        )

        first = poller.run(healthy + stuck, remaining_ms=lambda: 20_000)
        assert (first.resolved, first.not_reached, first.cursor) == (8, 0, None)
        assert (first.changed, first.errors) == (6, 2)
        for f in stuck:
            error = state.tags.get(f.image).last_error or ""  # type: ignore[union-attr]
            assert f"{frozen.host}: no answer to any request in this poll" in error, error
        assert {ch.move.image for ch in queue.sent} == {f.image for f in healthy}
        reached = frozen.accepted
        assert reached >= 1

        moved = push_image(registry.url, "faults/beside3", "stable")
        second = poller.run(healthy + stuck, remaining_ms=lambda: 20_000)
        assert (second.resolved, second.not_reached, second.changed, second.errors) == (8, 0, 1, 2)
        assert (f"{registry.host}/faults/beside3:stable", moved) in {
            (ch.move.image, ch.move.digest) for ch in queue.sent
        }
        assert frozen.accepted == reached  # skipped: the breaker is open
        errors = {r.image: r.error or "" for r in second.results if r.outcome == "error"}
        assert all(
            "skipped" in errors[f.image] and "no answer to any request" in errors[f.image] for f in stuck
        )

        skew[0] += 61  # past the cooldown (60 s)
        third = poller.run(healthy + stuck, remaining_ms=lambda: 20_000)
        assert (third.not_reached, third.errors) == (0, 2)
        assert frozen.accepted > reached  # tried again


def test_a_registry_answering_every_request_after_the_deadline_is_never_cut(
    registry: RegistryServer, proxy: FaultProxy, state: State
) -> None:
    """The registries' deadline is not a time to answer in: four requests at a time, each answered
    0.2 s after a deadline of 0.3 s, run after run. Every tag resolves, none is ever skipped."""
    names = [f"slow{i}" for i in range(8)]
    for n in names:
        push_image(registry.url, f"faults/{n}", "stable", content=b"slow")
    proxy.add(Fault("delay", seconds=0.5))
    with client(timeout=5.0, per_registry=4, registry_deadline=0.3) as c:
        poller = Poller(Detector(c, state, ListQueue()), c, state, lambda _h: Registry(insecure=True))
        first = poller.run(followed(proxy.host, names))
        second = poller.run(followed(proxy.host, names))
    assert (first.resolved, first.changed, first.errors) == (8, 8, 0)
    assert (second.resolved, second.unchanged, second.errors) == (8, 8, 0)
    assert len(proxy.seen()) == 16  # each tag asked once a run: no retry, no skip


def test_frozen_registries_holding_every_slot_do_not_starve_the_real_one(
    registry: RegistryServer, state: State
) -> None:
    """Two silent TCP servers whose tags sort first take every global slot (2 x 2 of 4) before the
    real registry (as localhost) is asked. Within a budget shorter than one frozen request's tries
    (5 s < 3 x 2 s), the run resolves every tag of the real registry, records the frozen ones as
    errors and leaves nothing for the next run; the next run polls the real registry again."""
    names = [f"starved{i}" for i in range(4)]
    for n in names:
        push_image(registry.url, f"faults/{n}", "stable")
    healthy = followed(f"localhost:{registry.port}", names)
    with (
        HangingServer() as frozen_a,
        HangingServer() as frozen_b,
        client(timeout=2.0, max_concurrency=4, per_registry=2, registry_deadline=0.3) as c,
    ):
        stuck = followed(frozen_a.host, ["a0", "a1", "a2"]) + followed(frozen_b.host, ["b0", "b1", "b2"])
        assert sorted(f.image for f in stuck + healthy)[-1] == healthy[-1].image  # asked last
        queue = ListQueue()
        poller = Poller(
            Detector(c, state, queue), c, state, lambda _h: Registry(insecure=True), reserve_seconds=0
        )
        first = poller.run(stuck + healthy, remaining_ms=lambda: 5_000)
        assert (first.resolved, first.not_reached, first.cursor) == (10, 0, None)
        assert (first.changed, first.errors) == (4, 6)
        assert {ch.move.image for ch in queue.sent} == {f.image for f in healthy}
        for f in stuck:
            error = state.tags.get(f.image).last_error or ""  # type: ignore[union-attr]
            assert "no answer to any request in this poll" in error, error
        assert frozen_a.accepted == frozen_b.accepted == 2  # each held its 2 slots
        second = poller.run(stuck + healthy, remaining_ms=lambda: 5_000)
    assert (second.resolved, second.unchanged, second.errors) == (10, 4, 6)
