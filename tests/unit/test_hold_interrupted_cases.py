"""The interleavings ``tagpin.usecases.interrupted`` exists for, replayed one by one (the world, its
actors and the oracle are ``test_hold_interrupted``'s)."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.ports.state import TargetStatus
from tagpin.ports.workloads import Forbidden

from tests.support.constants import D0
from tests.unit.test_hold_interrupted import APP, BY_HAND, DIGESTS, WEB, World


@pytest.fixture
def world(dynamodb: Any) -> World:
    return World(dynamodb)


def test_a_consumer_stopped_between_its_patch_and_the_put_back(world: World) -> None:
    """The hold lands after the consumer read its claim; its PATCH lands; it stops before it
    records anything. The message comes back and finds the target held (nothing done); the
    reconciler puts back the image the workload ran, once."""
    apply = world.move(DIGESTS[0])
    world.park(apply, "Cluster.set_image")
    assert world.hold()
    world.baton.step(apply)  # the PATCH lands
    assert world.image() == f"{APP}@{DIGESTS[0]}"
    world.stop(apply)  # before its conditional write of applied
    again = world.apply(world.changes[apply])
    assert world.baton.finish(again).outcome is ApplyOutcome.SUPERSEDED  # held: nothing done
    assert world.image() == f"{APP}@{DIGESTS[0]}"
    report = world.reconcile()
    assert world.image() == f"{APP}@{D0}"
    assert report.put_back == [WEB.id]
    assert world.reconcile().put_back == []
    world.settle()
    world.check()


def test_a_hold_written_after_applied_keeps_the_new_digest(world: World) -> None:
    assert world.baton.finish(world.move(DIGESTS[0])).outcome is ApplyOutcome.PATCHED
    assert world.hold()
    world.settle()
    assert world.image() == f"{APP}@{DIGESTS[0]}"
    world.check()


def test_a_hold_over_a_claim_never_patched_is_settled_once_the_claim_is_old(world: World) -> None:
    apply = world.move(DIGESTS[0])
    world.park(apply, "Cluster.get")  # claimed
    assert world.hold()
    world.stop(apply)
    assert world.reconcile().put_back == []
    assert world.store.targets.get(WEB.id).interrupted() is not None  # type: ignore[union-attr]
    world.settle()
    state = world.store.targets.get(WEB.id)
    assert state is not None and state.interrupted() is None and state.status is TargetStatus.HELD
    assert world.image() == f"{APP}@{D0}"
    world.check()


def test_a_persons_edit_after_the_interrupted_patch_stands(world: World) -> None:
    apply = world.move(DIGESTS[0])
    world.park(apply, "Cluster.set_image")
    assert world.hold()
    world.baton.step(apply)
    world.stop(apply)
    world.set_by_hand(BY_HAND[1])
    assert world.reconcile().put_back == []
    world.settle()
    assert world.image() == BY_HAND[1]
    world.check()


def test_a_hold_over_a_claim_that_finds_the_digest_running_stays(world: World) -> None:
    """A consumer stops after its PATCH; the message comes back, claims again, finds the digest
    running, and a person holds before it records ``applied``: the hold stays (``applied`` was once
    written over it), and the workload keeps the digest it ran."""
    first = world.move(DIGESTS[0])
    world.park(first, "DynamoTargets.finish")
    world.stop(first)
    again = world.apply(world.changes[first])
    world.park(again, "DynamoTargets.finish")
    assert world.hold()
    assert world.baton.finish(again).outcome is ApplyOutcome.HELD
    world.settle()
    assert world.image() == f"{APP}@{DIGESTS[0]}"
    world.check()


def test_a_hold_released_and_written_again_before_the_patch_lands_is_kept(world: World) -> None:
    """Found by the generated interleavings: a person holds, releases and holds again while the
    consumer is between its claim's last read and its PATCH; the PATCH lands after the second hold.
    The release leaves the target pending as the claim left it, so the second hold is over that
    claim too, and the consumer puts the image back."""
    apply = world.move(DIGESTS[0])
    world.park(apply, "Cluster.set_image")
    assert world.hold()
    world.release()
    assert world.hold()
    assert world.baton.finish(apply).outcome is ApplyOutcome.HELD
    assert world.image() == f"{APP}@{D0}"
    world.settle()
    world.check()


@pytest.mark.parametrize("got", [False, True], ids=["before-its-get", "after-its-get"])
def test_a_release_before_the_consumers_put_back_reads_the_hold_again_stands(world: World, got: bool) -> None:
    """The hold lands after the claim's last read; the PATCH lands; the consumer finds the target
    held over its claim and goes to put back the image the patch replaced. The person releases
    before the put-back's GET of the workload, or after it: the put-back reads the hold again after
    its GET, and the release stands (nothing put back; the workload keeps the digest, the target is
    pending for the next check). Before it read the hold again, the old image went back on."""
    apply = world.move(DIGESTS[0])
    world.park(apply, "Cluster.set_image")
    assert world.hold()
    world.baton.step(apply)  # the PATCH lands under the hold
    world.park(apply, "Cluster.get")  # found held over its claim: the put-back's GET is next
    if got:
        world.baton.step(apply)
    world.release()
    assert world.baton.finish(apply).outcome is ApplyOutcome.HELD
    assert world.image() == f"{APP}@{DIGESTS[0]}"
    state = world.store.targets.get(WEB.id)
    assert state is not None and state.status is TargetStatus.PENDING
    world.settle()
    world.check()


def test_a_release_between_the_put_backs_read_of_the_hold_and_its_patch_is_not_seen(world: World) -> None:
    """The window left (one call): the put-back read the hold after its GET, the release lands
    before its PATCH, and the image the hold asked for goes back on all the same (the state table
    and the workload are two stores); the oracle admits that one write."""
    apply = world.move(DIGESTS[0])
    world.park(apply, "Cluster.set_image")
    assert world.hold()
    world.baton.step(apply)  # the PATCH lands under the hold
    world.park(apply, "Cluster.get")
    world.park(apply, "Cluster.set_image")  # the hold read again after the GET: still held
    world.release()
    assert world.baton.finish(apply).outcome is ApplyOutcome.HELD
    assert world.image() == f"{APP}@{D0}"
    world.settle()
    world.check()


def test_a_hold_over_a_claim_whose_patch_fails_stays(world: World) -> None:
    """The PATCH is refused (RBAC) after a hold landed over the claim: the failure is not recorded
    over the hold (it was, unconditionally: the hold was gone and the next poll patched)."""
    apply = world.move(DIGESTS[0])
    world.park(apply, "Cluster.set_image")
    assert world.hold()
    world.cluster.patch_error = Forbidden("patch is forbidden")
    world.baton.finish(apply)
    state = world.store.targets.get(WEB.id)
    assert state is not None and state.status is TargetStatus.HELD
    assert world.image() == f"{APP}@{D0}"
