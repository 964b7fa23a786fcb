"""A whole change (``Applier.apply``) reads the tag's state and its targets' in one request, before
its promotion starts (``Targets.get_with_tag``), not the targets' after it: the interleavings of
test_drift, with the consumer's whole change as an actor (the read, the promotion's start, its
STARTED item, each target's claim, GET, claim read again, PATCH, finish) among the reconciler, the
verifier's rollbacks and people setting images, holding and releasing. Its invariants hold: tagpin
never patches over a hold, never holds what tagpin wrote; and every change read before it started
its promotion."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from hypothesis.stateful import rule
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome, ApplyResult
from tagpin.domain.refs import Digest
from tagpin.usecases.apply import Applier, ApplyTarget

from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0
from tests.support.interleave import run_interleavings
from tests.unit.test_drift import APP, DIGESTS, NAMES, Interleavings, World

CHANGES = "change-"


def change(world: World, digest: str, observed_at: int) -> str:
    """The consumer's change of ``digest`` for both targets, as an actor."""
    actor = world._name(CHANGES.rstrip("-"))
    applier = Applier(
        followed=lambda: world.followed,
        state=world.baton.wrap_state(world.store, actor),
        workloads=world._clusters(actor),
        clock=world.clock,
    )
    move = Move(image=APP, digest=Digest(digest), observed_at=observed_at, trigger=Trigger.POLL)
    world.baton.start(actor, lambda: applier.apply(Change(move=move)))
    return actor


class WholeChanges(Interleavings):
    @rule()
    def a_change_arrives(self) -> None:
        """The changes queue delivers the tag's current digest (again, or late): the whole change."""
        tag = self.store.tags.get(APP)
        assert tag is not None
        change(self.world, tag.digest, tag.observed_at)

    def teardown(self) -> None:
        super().teardown()
        for actor in {a for a, _ in self.world.baton.log if a.startswith(CHANGES)}:
            calls = [c for a, c in self.world.baton.log if a == actor and c != "start"]
            if "DynamoPromotions.start" in calls:  # read first, in one request
                assert calls.index("DynamoTargets.get_with_tag") < calls.index("DynamoPromotions.start")
                assert "DynamoTargets.get_many" not in calls and "DynamoTags.get" not in calls, calls
            writes = [i for i, c in enumerate(calls) if c.split(".")[1] in ("claim", "finish", "note")]
            if "DynamoHistory.image_event" in calls and writes:  # STARTED before any target's record
                assert calls.index("DynamoHistory.image_event") < writes[0], calls


def test_generated_interleavings_of_whole_changes(dynamodb: Any) -> None:
    WholeChanges.dynamodb = dynamodb
    run_interleavings(WholeChanges, examples=20, steps=30)


def test_the_started_item_and_the_idempotency_record_are_written_side_by_side(dynamodb: Any) -> None:
    """The STARTED history item is waited for inside the idempotency guard, before the claim: its
    write and the guard's (the consumer's idempotency record) meet, each waiting for the other."""
    world = World(dynamodb)
    world.applied(D0)
    moved = world.store.tags.record(APP, DIGESTS[1], world.clock(), Trigger.POLL)
    meeting = threading.Barrier(2, timeout=30)
    trail = world.store.history

    class Meeting:  # the first image_event (STARTED) waits, before it runs, for the guard's write
        def __getattr__(self, attribute: str) -> Any:
            return getattr(trail, attribute)

        def image_event(self, *args: Any, **kwargs: Any) -> None:
            if meeting.n_waiting or not guarded:  # broken (raises) when the guard's is not under way
                meeting.wait()
            trail.image_event(*args, **kwargs)

    met = dataclasses.replace(world.store, history=Meeting())  # type: ignore[arg-type]
    guarded: list[str] = []

    def guard(fn: ApplyTarget) -> ApplyTarget:
        def once(change: Any) -> ApplyResult:
            if not guarded:  # the first target's idempotency record, written as STARTED is
                meeting.wait()
            guarded.append(change.target_id)
            return fn(change)

        return once

    applier = Applier(
        followed=lambda: world.followed,
        state=met,
        workloads=FakeClusters(east=FakeCluster(world.cluster.items.values())),
        clock=world.clock,
        guard=guard,
    )
    move = Move(
        image=APP, digest=Digest(DIGESTS[1]), observed_at=moved.current.observed_at, trigger=Trigger.POLL
    )
    results = applier.apply(Change(move=move))
    assert [r.outcome for r in results] == [ApplyOutcome.PATCHED] * len(NAMES)
    assert len(guarded) == len(NAMES)
    events = sorted(str(e.event) for e in world.store.history.of_image(APP))
    assert events == ["applied", "started"], events
