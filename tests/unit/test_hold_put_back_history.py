"""A put-back under a hold leaves an item in the target's trail (``TargetNote.PUT_BACK``): the
console and ``tagpin history`` show which image went back on and who put it there, the consumer
that made the patch or the reconciler after it (the world and its actors are
``test_hold_interrupted``'s)."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin.domain.moves import Trigger
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.ports.history import HistoryEntry
from tagpin.ports.targets import TargetNote

from tests.support.constants import D0
from tests.unit.test_hold_interrupted import APP, DIGESTS, WEB, World


@pytest.fixture
def world(dynamodb: Any) -> World:
    return World(dynamodb)


def put_backs(world: World) -> list[HistoryEntry]:
    return [e for e in world.store.history.of_target(WEB.id) if e.status == TargetNote.PUT_BACK]


def test_the_consumers_own_put_back_is_in_the_trail(world: World) -> None:
    """The hold lands after the claim's last read; the consumer's PATCH lands, it finds the hold
    and puts back the image the workload ran: one item says so, with the move's trigger."""
    apply = world.move(DIGESTS[0])
    world.park(apply, "Cluster.set_image")
    assert world.hold()
    assert world.baton.finish(apply).outcome is ApplyOutcome.HELD
    assert world.image() == f"{APP}@{D0}"
    [item] = put_backs(world)
    assert item.digest == DIGESTS[0] and item.trigger == Trigger.POLL
    assert item.detail is not None and f"{APP}@{D0}" in item.detail
    world.settle()
    assert len(put_backs(world)) == 1  # the reconciler finds nothing more to put back
    world.check()


def test_the_reconcilers_put_back_is_in_the_trail_once(world: World) -> None:
    """The consumer stops between its PATCH and the put-back; the reconciler puts the image back
    and says so once, however many runs follow."""
    apply = world.move(DIGESTS[0])
    world.park(apply, "Cluster.set_image")
    assert world.hold()
    world.baton.step(apply)  # the PATCH lands
    world.stop(apply)
    assert put_backs(world) == []
    assert world.reconcile().put_back == [WEB.id]
    [item] = put_backs(world)
    assert item.digest == DIGESTS[0] and item.trigger == Trigger.RECONCILE
    assert item.detail is not None and f"{APP}@{D0}" in item.detail
    world.reconcile()
    world.settle()
    assert len(put_backs(world)) == 1
    world.check()
