"""The poll's cursor as a warm poller meets it: its first requests go out before the cursor is read
(it starts where it left the cursor, and the read confirms it), a cursor another run moved meanwhile
is followed all the same, and a poll that neither starts nor stops at a cursor writes nothing."""

from __future__ import annotations

import dataclasses

from tagpin.domain.config import FollowedImage, Registry, Target
from tagpin.domain.poll_pass import PollPass
from tagpin.domain.shards import WHOLE, PollPart
from tagpin.ports.registry import OCI_MANIFEST
from tagpin.ports.state import State
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller

from tests.support.clock import FakeClock
from tests.support.queues import ListQueue
from tests.support.registry import ScriptedRegistry

IMAGES = [f"registry-a.example/team/svc{i:02d}:stable" for i in range(6)]
FOLLOWED = [
    FollowedImage(image=image, targets=[Target(cluster="c", name=f"svc{i}", container="app")])
    for i, image in enumerate(IMAGES)
]


class Watched:
    """The state's cursor, noting how many tags the registry had been asked for when each read
    came, and every write."""

    def __init__(self, inner: object, registry: ScriptedRegistry) -> None:
        self.inner = inner
        self.registry = registry
        self.asked_at_read: list[int] = []
        self.writes: list[tuple[str | None, PollPart]] = []

    def get(self, part: PollPart = WHOLE) -> PollPass:
        self.asked_at_read.append(len(self.registry.calls))
        found: PollPass = self.inner.get(part)  # type: ignore[attr-defined]
        return found

    def put(self, position: PollPass, at: int, part: PollPart = WHOLE) -> None:
        self.writes.append((position.cursor, part))
        self.inner.put(position, at, part)  # type: ignore[attr-defined]


def watched(store: State) -> tuple[Poller, ScriptedRegistry, Watched, State]:
    registry = ScriptedRegistry(
        {image: f"sha256:{i:064x}" for i, image in enumerate(IMAGES)},
        media_type=OCI_MANIFEST,
        clock=FakeClock(1000.0),
    )
    cursor = Watched(store.cursor, registry)
    state = dataclasses.replace(store, cursor=cursor)  # type: ignore[arg-type]
    poller = Poller(
        Detector(registry, state, ListQueue()),
        registry,
        state,
        lambda _h: Registry(),
        monotonic=registry.clock,
        chunk=2,
    )
    return poller, registry, cursor, state


def test_a_warm_poll_asks_the_registry_before_its_cursor_is_read(store: State) -> None:
    poller, registry, cursor, _ = watched(store)
    poller.run(FOLLOWED)
    assert cursor.asked_at_read == [0]  # a new poller waits for the cursor: it does not know it
    registry.calls.clear()
    summary = poller.run(FOLLOWED)
    assert cursor.asked_at_read[1] > 0  # the warm one had its first chunks asked for already
    assert registry.calls == IMAGES and summary.resolved == len(IMAGES)


def test_a_cursor_moved_by_another_run_is_where_a_warm_poll_goes_on(store: State) -> None:
    poller, registry, _, _ = watched(store)
    poller.run(FOLLOWED)
    store.cursor.put(PollPass(IMAGES[3], 1), 1)  # another invocation ran out of time there meanwhile
    registry.calls.clear()
    summary = poller.run(FOLLOWED)
    # the chunks started from where this poller left the cursor are dropped; the run goes from it
    assert registry.calls[-len(IMAGES) :] == IMAGES[3:] + IMAGES[:3]
    assert (summary.resolved, summary.unchanged + summary.changed, summary.cursor) == (6, 6, None)
    assert store.cursor.get() == PollPass()  # it finished: the cursor it started from is cleared


def test_the_cursor_is_written_only_when_it_moves(store: State) -> None:
    poller, _, cursor, _ = watched(store)
    poller.run(FOLLOWED)
    poller.run(FOLLOWED)
    assert cursor.writes == []  # finished, from no cursor to none: nothing to write, twice
    store.cursor.put(PollPass(IMAGES[2], 1), 1, PollPart(0, 2))  # a part that ran out of time, then finishes
    fresh, _, part_cursor, _ = watched(store)
    fresh.run(FOLLOWED, part=PollPart(0, 2))
    assert part_cursor.writes == [(None, PollPart(0, 2))]
