"""The Poller against a scripted registry and the state table in moto: one resolution per distinct
tag, only real changes enqueued, the time budget and its cursor, errors recorded per registry."""

from __future__ import annotations

import dataclasses
import time

import pytest
from tagpin.domain.config import FollowedImage, Registry, Target
from tagpin.domain.messages import Trigger
from tagpin.domain.poll_pass import PollPass
from tagpin.ports.registry import OCI_MANIFEST, RegistryUnavailable
from tagpin.ports.state import State, TargetStatus
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller

from tests.support.clock import FakeClock
from tests.support.queues import ListQueue
from tests.support.registry import ScriptedRegistry

A = "registry-a.example"
B = "registry-b.example"


def digest(n: int) -> str:
    return f"sha256:{n:064x}"


def scripted(tags: dict[str, str], cost: float = 0.0) -> ScriptedRegistry:
    """A registry answering ``tags`` (image -> digest) with image manifests (no index: no
    attestation comparison); each resolution costs ``cost`` seconds of its clock."""
    return ScriptedRegistry(tags, media_type=OCI_MANIFEST, clock=FakeClock(1000.0), cost=cost)


def target(name: str) -> Target:
    return Target(cluster="c", name=name, container="app")


def poller(registry: ScriptedRegistry, store: State, queue: ListQueue, **kw: object) -> Poller:
    return Poller(
        Detector(registry, store, queue),
        registry,
        store,
        lambda _host: Registry(),
        monotonic=registry.clock,
        **kw,  # type: ignore[arg-type]
    )


def apply_all(store: State, followed: list[FollowedImage], digests: dict[str, str]) -> None:
    """What the consumer does after patching: every target runs its tag's digest."""
    for f in followed:
        for t in f.targets:
            assert store.targets.claim(t.id, f.image, digests[f.image], 1, "poll", 2)
            assert store.targets.finish(t.id, digests[f.image], TargetStatus.APPLIED, 3, trigger="poll")


def test_each_distinct_tag_resolved_once(store: State) -> None:
    shared, other = f"{A}/team/web:stable", f"{A}/team/api:1"
    registry = scripted({shared: digest(1), other: digest(2)})
    followed = [
        FollowedImage(image=shared, targets=[target("web-1")]),
        FollowedImage(image=other, targets=[target("api")]),
        FollowedImage(image=shared, targets=[target("web-2"), target("web-3")]),
        FollowedImage(image=shared, targets=[target("web-1")]),  # listed twice: one target
    ]
    queue = ListQueue()
    summary = poller(registry, store, queue, chunk=1).run(followed)
    assert sorted(registry.calls) == sorted([shared, other])
    assert (summary.resolved, summary.changed, summary.enqueued) == (2, 2, 2)
    assert sorted((c.move.image, c.move.digest) for c in queue.sent) == [
        (other, digest(2)),
        (shared, digest(1)),
    ]
    shared_result = next(r for r in summary.results if r.image == shared)
    assert shared_result.behind == 3  # web-1, web-2, web-3: the targets of every listing


def test_only_real_changes_are_enqueued(store: State) -> None:
    images = [f"{A}/team/app{i}:stable" for i in range(5)]
    tags = {image: digest(i) for i, image in enumerate(images)}
    registry = scripted(tags)
    followed = [FollowedImage(image=image, targets=[target(f"app{i}")]) for i, image in enumerate(images)]
    queue = ListQueue()
    p = poller(registry, store, queue, chunk=2)
    assert p.run(followed).enqueued == 5
    apply_all(store, followed, tags)
    queue.sent.clear()

    steady = p.run(followed)  # nothing moved and every target runs its digest
    assert (steady.resolved, steady.unchanged, steady.changed, steady.enqueued) == (5, 5, 0, 0)
    assert queue.sent == [] and steady.results == []

    registry.answers[images[3]] = digest(33)  # one tag moves
    moved = p.run(followed)
    assert (moved.unchanged, moved.changed, moved.enqueued) == (4, 1, 1)
    assert [(c.move.image, c.move.digest) for c in queue.sent] == [(images[3], digest(33))]
    stored = store.tags.get(images[3])
    assert stored is not None and stored.digest == digest(33)


def test_time_budget_stops_persists_the_cursor_and_no_tag_starves(store: State) -> None:
    images = [f"{A}/team/svc{i:02d}:stable" for i in range(10)]
    registry = scripted({image: digest(i) for i, image in enumerate(images)}, cost=1.0)  # one second per tag
    followed = [FollowedImage(image=image, targets=[target(f"svc{i}")]) for i, image in enumerate(images)]
    queue = ListQueue()
    p = poller(registry, store, queue, chunk=2, reserve_seconds=1.0)

    first = p.run(followed, remaining_ms=lambda: 5_000)  # 4 s after the reserve: 4 tags
    assert first.resolved == 4 and first.not_reached == 6
    assert first.cursor == images[4] and store.cursor.get().cursor == images[4]
    assert {r.image for r in first.results} == set(images[:4])

    registry.calls.clear()
    second = p.run(followed, remaining_ms=lambda: 5_000)
    assert registry.calls == images[4:8]  # continues where the first stopped
    assert second.cursor == images[8] and store.cursor.get().cursor == images[8]

    registry.calls.clear()
    third = p.run(followed, remaining_ms=lambda: 5_000)
    assert registry.calls == images[8:] + images[:2]  # wraps around: no tag starves
    assert third.cursor == images[2]

    registry.calls.clear()
    full = p.run(followed, remaining_ms=lambda: 60_000)
    assert registry.calls == images[2:] + images[:2]
    assert (full.cursor, full.not_reached, full.resolved) == (None, 0, 10)
    assert store.cursor.get() == PollPass()
    # Every tag was enqueued once while the budget was short, and the full run adds nothing new.
    assert sorted({c.move.image for c in queue.sent}) == images


def test_a_pass_that_goes_on_over_an_hour_and_another_run_leaves_the_part_behind(store: State) -> None:
    """``PollBehind`` (tagpin.domain.poll_pass): the pass keeps since when it began (its first run's
    start) while later runs continue it; a run that continues it and stops again an hour or more
    after is behind; the run that ends it is not, and clears it."""
    images = [f"{A}/team/svc{i:02d}:stable" for i in range(10)]
    registry = scripted({image: digest(i) for i, image in enumerate(images)}, cost=1.0)
    followed = [FollowedImage(image=image, targets=[target(f"svc{i}")]) for i, image in enumerate(images)]
    clock = FakeClock(1_800_000_000_000)
    p = poller(registry, store, ListQueue(), chunk=2, reserve_seconds=1.0, clock=clock)
    short = {"remaining_ms": lambda: 5_000}  # 4 tags a run

    first = p.run(followed, **short)
    assert not first.behind and store.cursor.get() == PollPass(images[4], 1_800_000_000_000)
    clock.advance(30 * 60_000)
    assert not p.run(followed, **short).behind  # continued, stopped again: 30 minutes on
    clock.advance(40 * 60_000)
    third = p.run(followed, **short)
    assert third.behind and store.cursor.get() == PollPass(images[2], 1_800_000_000_000)
    clock.advance(5 * 60_000)
    full = p.run(followed, remaining_ms=lambda: 60_000)
    assert (full.behind, full.cursor) == (False, None) and store.cursor.get() == PollPass()
    # a new pass that stops in its first run is not behind, however long ago the last one began
    assert not p.run(followed, **short).behind


def test_a_cursor_kept_without_its_pass_start_counts_from_when_it_was_written(store: State) -> None:
    """A cursor an older poller wrote (``image`` and ``at``, no ``since``): its pass is counted from
    ``at``, so an upgrade alarms no sooner than before."""
    store.cursor.put(PollPass(f"{A}/team/a:stable"), 1_700_000_000_000)
    assert store.cursor.get() == PollPass(f"{A}/team/a:stable", 1_700_000_000_000)


def test_out_of_time_before_anything_resolves_keeps_the_cursor(store: State) -> None:
    images = [f"{A}/team/x{i}:stable" for i in range(3)]
    registry = scripted({image: digest(i) for i, image in enumerate(images)}, cost=1.0)
    followed = [FollowedImage(image=image, targets=[target(f"x{i}")]) for i, image in enumerate(images)]
    store.cursor.put(PollPass(images[1], 1), 1)
    summary = poller(registry, store, ListQueue(), reserve_seconds=10.0).run(
        followed, remaining_ms=lambda: 5_000
    )
    assert (summary.resolved, summary.not_reached, summary.cursor) == (0, 3, images[1])
    assert store.cursor.get().cursor == images[1]


def test_errors_are_recorded_on_each_tag_of_the_failing_registry(store: State) -> None:
    down = [f"{A}/team/down{i}:stable" for i in range(3)]
    healthy = [f"{B}/team/up{i}:stable" for i in range(3)]
    registry = scripted({image: digest(i) for i, image in enumerate(down + healthy)})
    followed = [
        FollowedImage(image=image, targets=[target(f"t{i}")]) for i, image in enumerate(down + healthy)
    ]
    queue = ListQueue()
    p = poller(registry, store, queue, chunk=4)
    p.run(followed)  # every tag known, with a digest
    queue.sent.clear()

    registry.down[A] = RegistryUnavailable(f"{A}: skipped, the registry failed 5 times in a row", host=A)
    registry.answers.update({image: digest(100 + i) for i, image in enumerate(healthy)})  # B's tags move
    summary = p.run(followed)
    assert (summary.errors, summary.changed, summary.enqueued) == (3, 3, 3)
    for i, image in enumerate(down):
        stored = store.tags.get(image)
        assert stored is not None
        assert stored.digest == digest(i)  # the working digest is kept
        assert stored.last_error is not None and "failed 5 times" in stored.last_error
    for i, image in enumerate(healthy):
        stored = store.tags.get(image)
        assert stored is not None and stored.digest == digest(100 + i) and not stored.last_error
    assert {c.move.image for c in queue.sent} == set(healthy)
    errors = {r.image: r.error for r in summary.results if r.outcome == "error"}
    assert set(errors) == set(down) and all("RegistryUnavailable" in (e or "") for e in errors.values())


@pytest.mark.parametrize("chunk", [1, 3, 250])
def test_chunk_size_does_not_change_the_outcome(store: State, chunk: int) -> None:
    images = [f"{A}/team/c{i}:stable" for i in range(7)]
    registry = scripted({image: digest(i) for i, image in enumerate(images)})
    followed = [FollowedImage(image=image, targets=[target(f"c{i}")]) for i, image in enumerate(images)]
    queue = ListQueue()
    summary = poller(registry, store, queue, chunk=chunk).run(followed)
    assert (summary.resolved, summary.changed, summary.enqueued) == (7, 7, 7)
    assert sorted(registry.calls) == images


class FlakyQueue(ListQueue):
    """SQS refusing one send (a throttle): our own infrastructure failing for one tag."""

    def __init__(self, refuse: str) -> None:
        super().__init__()
        self.refuse = refuse

    def send(self, change) -> None:  # type: ignore[no-untyped-def]
        if change.move.image == self.refuse:
            raise RuntimeError("ThrottlingException")
        super().send(change)


def test_a_failing_send_for_one_tag_does_not_end_the_run(store: State) -> None:
    images = [f"{A}/team/app{i}:stable" for i in range(4)]
    registry = scripted({image: digest(i) for i, image in enumerate(images)})
    followed = [FollowedImage(image=image, targets=[target(f"app{i}")]) for i, image in enumerate(images)]
    queue = FlakyQueue(refuse=images[1])
    summary = poller(registry, store, queue, chunk=2).run(followed)
    assert summary.resolved == 4 and summary.errors == 1 and summary.enqueued == 3
    assert sorted(c.move.image for c in queue.sent) == sorted(set(images) - {images[1]})
    (failed,) = [r for r in summary.results if r.outcome == "error"]
    assert failed.image == images[1] and "ThrottlingException" in (failed.error or "")


class Counting:
    """A repository whose reads of many items are counted (by tag or target id)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.read: list[str] = []

    def get_many(self, keys: list[str]) -> object:
        self.read.extend(keys)
        return self.inner.get_many(keys)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_settled_tag_costs_no_read_of_its_own_until_it_moves_or_fails(store: State) -> None:
    images = [f"{A}/team/s{i}:stable" for i in range(6)]
    tags = {image: digest(i) for i, image in enumerate(images)}
    registry = scripted(dict(tags))
    followed = [FollowedImage(image=image, targets=[target(f"s{i}")]) for i, image in enumerate(images)]
    queue = ListQueue()
    assert poller(registry, store, queue, chunk=4).run(followed).enqueued == 6
    assert store.digests.all() == {}  # nothing settled while the targets are behind
    apply_all(store, followed, tags)
    assert poller(registry, store, queue, chunk=4).run(followed).unchanged == 6
    assert store.digests.all() == tags  # found unchanged with every target settled

    tag_reads, target_reads = Counting(store.tags), Counting(store.targets)
    counted = dataclasses.replace(store, tags=tag_reads, targets=target_reads)  # type: ignore[arg-type]
    steady = poller(registry, counted, queue, chunk=4).run(followed)
    assert (steady.unchanged, steady.enqueued) == (6, 0)
    assert (tag_reads.read, target_reads.read) == ([], [])

    # one tag moves: only its items are read, the move is enqueued and its entry dropped
    registry.answers[images[2]] = digest(50)
    queue.sent.clear()
    moved = poller(registry, counted, queue, chunk=4).run(followed)
    assert (moved.changed, moved.unchanged, [c.move.digest for c in queue.sent]) == (1, 5, [digest(50)])
    assert tag_reads.read == [images[2]]
    assert set(target_reads.read) == {followed[2].targets[0].id}  # by the poll, then the level check
    assert images[2] not in store.digests.all()

    # a registry failure drops the entries of its tags, so that their error is recorded and cleared
    registry.down[A] = RegistryUnavailable(f"{A}: down", host=A)
    assert poller(registry, store, queue, chunk=4).run(followed).errors == 6
    assert store.digests.all() == {}
    del registry.down[A]
    moved_target = followed[2].targets[0].id
    assert store.targets.claim(moved_target, images[2], digest(50), 100, "poll", 101)
    assert store.targets.finish(moved_target, digest(50), TargetStatus.APPLIED, 102, trigger="poll")
    back = poller(registry, store, queue, chunk=4).run(followed)
    assert (back.unchanged, back.errors) == (6, 0)
    assert all((t := store.tags.get(image)) is not None and t.last_error is None for image in images)
    poller(registry, store, queue, chunk=4).run(followed)  # found unchanged, no error: settled again
    assert store.digests.all() == {**tags, images[2]: digest(50)}


class ReadAfterAsking:
    """Settled digests whose read waits (up to 30 s: a busy machine) until the registry has been asked for
    ``tags`` tags."""

    def __init__(self, inner: object, registry: ScriptedRegistry, tags: int = 1) -> None:
        self.inner, self.registry, self.tags = inner, registry, tags
        self.asked_first: bool | None = None

    def all(self, shards: list[str] | None = None) -> object:
        deadline = time.monotonic() + 30
        while len(self.registry.calls) < self.tags and time.monotonic() < deadline:
            time.sleep(0.01)
        self.asked_first = len(self.registry.calls) >= self.tags
        return self.inner.all(shards)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_chunks_resolve_while_the_settled_digests_are_read(store: State) -> None:
    images = [f"{A}/team/r{i}:stable" for i in range(6)]
    tags = {image: digest(i) for i, image in enumerate(images)}
    registry = scripted(dict(tags))
    followed = [FollowedImage(image=image, targets=[target(f"r{i}")]) for i, image in enumerate(images)]
    queue = ListQueue()
    poller(registry, store, queue, chunk=2).run(followed)
    apply_all(store, followed, tags)
    poller(registry, store, queue, chunk=2).run(followed)  # found unchanged: settled
    registry.calls.clear()
    digests = ReadAfterAsking(store.digests, registry, tags=len(images))
    steady = poller(registry, dataclasses.replace(store, digests=digests), queue, chunk=2).run(followed)  # type: ignore[arg-type]
    assert digests.asked_first is True  # the read held no chunk back, the first or the ones after
    assert (steady.unchanged, steady.enqueued) == (6, 0)
    assert sorted(registry.calls) == sorted(images)  # each tag once, the first chunk included


def test_a_slow_read_of_the_settled_digests_holds_back_no_chunk_up_to_the_bound(store: State) -> None:
    """While the settled digests are read (at 10,000 tags a BatchGetItem of seconds), 16 chunks
    (4,000 tags in chunks of 250) are asked for; the ones after wait for the read (every chunk
    started is recorded, deadline or not)."""
    from tagpin.usecases.poll import WHILE_READING

    assert WHILE_READING == 16
    images = [f"{A}/team/s{i:02d}:stable" for i in range(17)]
    tags = {image: digest(i) for i, image in enumerate(images)}
    registry = scripted(dict(tags))
    followed = [FollowedImage(image=image, targets=[target(f"s{i}")]) for i, image in enumerate(images)]
    queue = ListQueue()
    poller(registry, store, queue, chunk=1).run(followed)
    apply_all(store, followed, tags)
    poller(registry, store, queue, chunk=1).run(followed)  # found unchanged: settled
    registry.calls.clear()
    digests = ReadAfterAsking(store.digests, registry, tags=16)
    steady = poller(registry, dataclasses.replace(store, digests=digests), queue, chunk=1).run(followed)  # type: ignore[arg-type]
    assert digests.asked_first is True  # 16 chunks of one tag asked for during the read
    assert registry.calls[16:] == [images[16]]  # the 17th after it
    assert (steady.unchanged, steady.enqueued) == (len(images), 0)
    assert sorted(registry.calls) == sorted(images)


def test_a_settled_digest_is_never_older_than_its_tag(store: State) -> None:
    """A move leaves a tombstone with its time; a settle is written only for the move it read."""
    from tagpin.adapters.dynamodb.digests import tombstone
    from tagpin.adapters.dynamodb.table import Table

    image = f"{A}/team/race:stable"
    store.tags.record(image, digest(1), 10, Trigger.POLL)
    assert store.digests.settle(image, digest(1), 10)
    assert store.digests.all() == {image: digest(1)}
    store.tags.record(image, digest(2), 20, Trigger.WEBHOOK)  # moved by another writer
    assert store.digests.all() == {}
    assert not store.digests.settle(image, digest(1), 10)  # a poll that read the old digest
    assert store.digests.all() == {}
    table: Table = store.tags._table  # type: ignore[attr-defined]
    tombstone(table, image, 15)  # an older move's tombstone arriving late changes nothing
    assert not store.digests.settle(image, digest(1), 15)
    assert store.digests.settle(image, digest(2), 20)  # the current move's
    assert store.digests.all() == {image: digest(2)}
    store.digests.drop(image)  # a registry error
    assert store.digests.all() == {}
    store.digests.drop(image)  # nothing to drop: no error


def test_settling_many_tags_writes_each_shard_a_few_times_and_leaves_a_moved_tag_out(
    store: State,
) -> None:
    """A poll settles its tags together: one write per 25 entries of a shard, not one per tag; an
    entry whose tag moved after the poll read it fails its own condition only."""
    from tagpin.adapters.dynamodb.digests import SETTLE_PER_WRITE, tombstone
    from tagpin.adapters.dynamodb.table import Table
    from tagpin.domain.shards import shard

    images = [f"{A}/team/app{n}:stable" for n in range(400)]
    for image in images:
        store.tags.record(image, digest(1), 10, Trigger.POLL)
    table: Table = store.tags._table  # type: ignore[attr-defined]
    moved = images[7]
    tombstone(table, moved, 20)  # moved after the poll read it at changed_at 10
    calls: list[str] = []
    table.client = _Counting(table.client, calls)
    written = store.digests.settle_many((image, digest(1), 10) for image in images)
    assert written == len(images) - 1
    assert store.digests.all() == {image: digest(1) for image in images if image != moved}
    shards: dict[str, int] = {}
    for image in images:
        shards[shard(image)] = shards.get(shard(image), 0) + 1
    together = sum(-(-n // SETTLE_PER_WRITE) for n in shards.values())
    same_shard = [i for i in images if shard(i) == shard(moved)]
    start = same_shard.index(moved) // SETTLE_PER_WRITE * SETTLE_PER_WRITE
    alone = len(same_shard[start : start + SETTLE_PER_WRITE])  # the failed write's, one by one
    assert calls.count("update_item") == together + alone
    assert together < len(images) / 4


def test_a_poll_settles_its_tags_in_a_few_writes(store: State) -> None:
    images = [f"{A}/team/app{n}:stable" for n in range(200)]
    tags = {image: digest(1) for image in images}
    followed = [FollowedImage(image=image, targets=[target(f"t{n}")]) for n, image in enumerate(images)]
    registry, queue = scripted(tags), ListQueue()
    poller(registry, store, queue).run(followed)
    apply_all(store, followed, tags)
    table = store.tags._table  # type: ignore[attr-defined]
    calls: list[str] = []
    table.client = _Counting(table.client, calls)
    summary = poller(registry, store, queue).run(followed)  # every tag found settled: written together
    assert summary.unchanged == len(images)
    assert store.digests.all() == tags
    from tagpin.domain.shards import shard

    assert calls.count("update_item") == len({shard(i) for i in images})  # one write per shard
    calls.clear()
    steady = poller(registry, store, queue).run(followed)  # the steady poll: no write but the cursor
    assert steady.unchanged == len(images)
    assert calls.count("update_item") == 0 and calls.count("batch_get_item") == 1


class _Counting:
    """A client that notes the name of every call it passes on."""

    def __init__(self, client: object, calls: list[str]) -> None:
        self._client = client
        self._calls = calls

    def __getattr__(self, name: str) -> object:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: object, **kwargs: object) -> object:
            self._calls.append(name)
            return attribute(*args, **kwargs)

        return call


def test_a_poll_of_moved_tags_reads_nothing_twice_and_writes_each_move_once(store: State) -> None:
    """Every tag moved: its change is written at once (no failed write of the unchanged case first)
    and its targets are not read again after the poll read them; each is enqueued once."""
    images = [f"{A}/team/app{n}:stable" for n in range(30)]
    followed = [FollowedImage(image=image, targets=[target(f"t{n}")]) for n, image in enumerate(images)]
    before = {image: digest(1) for image in images}
    registry, queue = scripted(before), ListQueue()
    poller(registry, store, queue).run(followed)
    apply_all(store, followed, before)
    poller(registry, store, queue).run(followed)  # settled
    queue.sent.clear()
    after = {image: digest(2) for image in images}
    table = store.tags._table  # type: ignore[attr-defined]
    calls: list[str] = []
    table.client = _Counting(table.client, calls)
    summary = poller(scripted(after), store, queue).run(followed)
    assert (summary.changed, summary.enqueued) == (len(images), len(images))
    assert sorted(c.move.image for c in queue.sent) == sorted(images)
    assert calls.count("update_item") == 2 * len(images)  # the move and its tombstone
    assert calls.count("batch_get_item") == 1 + 2  # the settled digests; the tags and targets, once
    assert all((t := store.tags.get(i)) is not None and t.digest == digest(2) for i in images)
