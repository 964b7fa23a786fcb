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
    state = world.state()
    assert state.interrupted() is None and state.status is TargetStatus.HELD
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


def test_a_hold_over_the_claim_again_of_a_patched_digest_undoes_the_first_patch(world: World) -> None:
    """A consumer stops after its PATCH, before it records ``applied``; the message comes back,
    claims again, finds the digest running, and a person holds before it records it. Nothing
    recorded the digest, so the hold stops the move: the first claim's patch is put back (the
    claims from the first not recorded to the one the hold is over are one move in flight). Before,
    the hold was over the second claim only, which patched nothing, and the digest stayed."""
    first = world.move(DIGESTS[0])
    world.park(first, "DynamoTargets.finish")
    world.stop(first)
    again = world.apply(world.changes[first])
    world.park(again, "DynamoTargets.finish")
    assert world.hold()
    assert world.baton.finish(again).outcome is ApplyOutcome.HELD
    assert world.image() == f"{APP}@{DIGESTS[0]}"  # the second claim patched nothing to put back
    assert world.reconcile().put_back == [WEB.id]
    assert world.image() == f"{APP}@{D0}"
    world.settle()
    world.check()


def test_a_hold_over_a_newer_claim_undoes_the_older_claims_patch_that_lands_under_it(world: World) -> None:
    """Found by the generated interleavings: consumer A (digest a) read its claim and goes to PATCH;
    consumer B (digest b) claims over it; a person holds (over B's claim) while the workload runs
    the image before both; A's PATCH lands under the hold. Before, A put nothing back (the hold was
    not over its claim), B never patched, and the workload kept a under a hold written while it
    ran the old image. A's claim is among the moves in flight the hold stops: A puts it back."""
    a = world.move(DIGESTS[0])
    world.park(a, "Cluster.set_image")
    b = world.move(DIGESTS[1])
    world.park(b, "Cluster.get")
    assert world.hold()
    assert world.baton.finish(a).outcome is ApplyOutcome.HELD
    assert world.image() == f"{APP}@{D0}"
    world.baton.finish(b)
    world.settle()
    world.check()


def test_the_reconciler_undoes_an_older_claims_patch_under_a_hold_over_a_newer(world: World) -> None:
    """As above, and A stops after its PATCH: the reconciler finds A's patch on the workload (its
    note names A's claim, among the moves the hold stops) and puts back the image before it."""
    a = world.move(DIGESTS[0])
    world.park(a, "Cluster.set_image")
    b = world.move(DIGESTS[1])
    world.park(b, "Cluster.get")
    assert world.hold()
    world.baton.step(a)  # the PATCH lands
    world.stop(a)
    world.baton.finish(b)
    assert world.image() == f"{APP}@{DIGESTS[0]}"
    assert world.reconcile().put_back == [WEB.id]
    assert world.image() == f"{APP}@{D0}"
    world.settle()
    world.check()


@pytest.mark.parametrize("recorded", [False, True], ids=["a-not-recorded", "a-recorded"])
def test_a_hold_over_a_claim_that_patched_over_an_older_puts_back_what_ran_before_the_moves(
    world: World, recorded: bool
) -> None:
    """A patches a; B claims over it, finds a on the workload and patches b; a person holds over
    B's claim. If A stopped before it recorded a, neither move was recorded: the image before A's
    patch goes back on (B's note keeps what A's replaced), not a. If A recorded a, it ended the
    moves a hold stops: a goes back on."""
    a = world.move(DIGESTS[0])
    if recorded:
        assert world.baton.finish(a).outcome is ApplyOutcome.PATCHED
    else:
        world.park(a, "DynamoTargets.finish")
        world.stop(a)
    b = world.move(DIGESTS[1])
    world.park(b, "DynamoTargets.finish")
    assert world.image() == f"{APP}@{DIGESTS[1]}"
    assert world.hold()
    assert world.baton.finish(b).outcome is ApplyOutcome.HELD
    assert world.image() == (f"{APP}@{DIGESTS[0]}" if recorded else f"{APP}@{D0}")
    world.settle()
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
    state = world.state()
    assert state.status is TargetStatus.PENDING
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
    state = world.state()
    assert state.status is TargetStatus.HELD
    assert world.image() == f"{APP}@{D0}"


def test_a_hold_written_again_before_the_consumers_last_record_stays(world: World) -> None:
    """Found by the generated interleavings: the PATCH lands; a hold makes the consumer's record of
    ``applied`` fail; the person releases before it reads the target again (pending: a newer claim,
    as far as it can tell) and holds again before it records the outcome once more. That record
    wrote ``applied`` over the hold (it asked only that the digest be the same), and the hold was
    gone. It never writes over a hold now: the hold stays, over the claim, and its patch goes back."""
    apply = world.move(DIGESTS[0])
    world.park(apply, "DynamoTargets.finish")
    assert world.hold()
    world.baton.step(apply)  # its record of applied fails: held
    world.park(apply, "DynamoTargets.get")
    world.release()
    world.baton.step(apply)  # reads the target again: pending
    world.park(apply, "DynamoTargets.finish")
    assert world.hold()
    assert world.baton.finish(apply).outcome is ApplyOutcome.HELD  # and put back at once
    assert world.image() == f"{APP}@{D0}"
    state = world.state()
    assert state.status is TargetStatus.HELD
    world.settle()
    world.check()


def test_a_failed_newer_claim_leaves_the_older_claims_patch_to_a_hold(world: World) -> None:
    """Found in review: consumer A (digest a) goes to PATCH; B claims b over it, and its PATCH is
    refused (recorded ``failed``); a person holds (over that failure); A's PATCH lands. A failure
    records only that its own claim did not patch: the claims before it stay in flight, the hold
    stops them, and A puts back the image before its patch. Before, ``failed`` ended every claim in
    flight, and a stayed under a hold written while the old image ran."""
    a = world.move(DIGESTS[0])
    world.park(a, "Cluster.set_image")
    b = world.move(DIGESTS[1])
    world.park(b, "Cluster.set_image")
    world.cluster.patch_error = Forbidden("patch is forbidden")
    world.baton.finish(b)
    world.cluster.patch_error = None
    state = world.state()
    assert state.status is TargetStatus.FAILED and len(state.claims) == 2
    assert world.hold()
    assert world.baton.finish(a).outcome is ApplyOutcome.HELD
    assert world.image() == f"{APP}@{D0}"
    world.settle()
    world.check()


def test_a_hold_settled_and_released_keeps_the_claims_still_in_flight(world: World) -> None:
    """Found in review: A patches a and stops; B claims b and reads the workload; a person holds;
    the reconciler puts the image back; the person releases; B's PATCH lands (a 409, read again);
    the person holds again before B records it. The reconciler keeps the claims a hold stops until
    they are too old to patch, put back or not, and a release gives them back: the second hold stops
    B's patch too (before, the reconciler forgot them once it put the image back)."""
    a = world.move(DIGESTS[0])
    world.park(a, "DynamoTargets.finish")
    world.stop(a)
    b = world.move(DIGESTS[1])
    world.park(b, "Cluster.set_image")
    assert world.hold()
    assert world.reconcile().put_back == [WEB.id]
    assert world.image() == f"{APP}@{D0}"
    world.release()
    world.park(b, "DynamoTargets.finish")  # its PATCH landed (a 409 first: read again)
    assert world.image() == f"{APP}@{DIGESTS[1]}"
    assert world.hold()
    assert world.baton.finish(b).outcome is ApplyOutcome.HELD
    assert world.image() == f"{APP}@{D0}"
    world.settle()
    world.check()
