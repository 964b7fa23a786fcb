"""tagpin never takes its own write for a person's change, and never writes over a person's hold
(``tagpin.usecases.drift``, the consumer's claim, the verifier's restore).

The real use cases run as actors, one port call at a time in an order the test chooses
(``tests.support.interleave``): the reconciler (LIST, state reads, GET, hold), the consumer
applying a digest (claim, GET, claim read again, PATCH, finish), the verifier rolling a failed
digest back (mark bad, GET, PATCH the previous image, finish), on two Deployments of one tag, with
the state table on moto. People act between any two calls: set an image by hand (pinned to any
digest, or unpinned), hold a target (`tagpin hold`), release it. The tag moves
forward and back (a plain tag may return to an earlier digest). The cluster knows who wrote each
container last. Invariants:

- no false hold: whenever the reconciler holds a target, a person was the last to set its image;
- no patch over a hold: tagpin never writes a workload while a live hold covers what it writes;
- liveness: a reconcile run on its own holds every target a person changed after tagpin settled it.

A hypothesis state machine generates the interleavings; the scripted tests below replay the ones
each of the three confirmation steps exists for, so that each step is needed by a test.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.config import FollowedImage, Kind, RolloutSettings, Target, parse_config
from tagpin.domain.messages import TargetChange, Trigger, Verification, VerificationKind
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.ports.state import State, TargetStatus
from tagpin.ports.workloads import ImageChange, Workload
from tagpin.usecases.apply import Applier
from tagpin.usecases.detect import Detector
from tagpin.usecases.promote import Promoter
from tagpin.usecases.reconcile import Reconciler
from tagpin.usecases.verify import Verifier

from tests.support.aws import create_table
from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters, Key
from tests.support.constants import D0, FOLLOW
from tests.support.interleave import Baton, run_interleavings
from tests.support.queues import ListQueue, ListVerificationQueue
from tests.support.registry import ScriptedRegistry
from tests.unit.conftest import SerializedClient

APP = "reg.example.com/team/app:stable"
NAMES = ("web", "api")
DIGESTS = [f"sha256:{c * 64}" for c in "abcdef"]
# What a person may set: pinned to a digest, or the tag unpinned. (Another repository's image makes a
# labelled workload follow that repository instead: discovery, not a hold.)
BY_HAND = [f"{APP}@{D0}", *(f"{APP}@{d}" for d in DIGESTS[:3]), APP]
CONFIG = parse_config("clusters:\n  east: {kubeconfig: {file: /dev/null}}\nimages: []\n")
FAILED_STATUS = {
    "observedGeneration": 10**6,
    "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
}
TABLES = itertools.count()


def target(name: str) -> Target:
    return Target(cluster="east", namespace="shop", kind=Kind.DEPLOYMENT, name=name, container=name)


def key(name: str) -> Key:
    return ("shop", Kind.DEPLOYMENT, name)


class WhoWroteCluster(FakeCluster):
    """A cluster that knows who set each workload's image last (tagpin: a PATCH; or a person), and
    reports a PATCH that lands while a live hold covers what it writes."""

    def __init__(self, world: World) -> None:
        super().__init__(
            Workload(
                "1",
                {name: f"{APP}@{D0}"},
                namespace="shop",
                name=name,
                labels=dict(FOLLOW),
                selector={"matchLabels": {"app": name}},
                # every verification finds the rollout failed
                rollout=Kind.DEPLOYMENT.profile.rollout_health(1, {}, FAILED_STATUS),
            )
            for name in NAMES
        )
        self.world = world
        self.writer: dict[Key, str] = {key(name): "tagpin" for name in NAMES}

    def set_image(self, namespace: str, kind: Kind, name: str, change: ImageChange) -> None:
        super().set_image(namespace, kind, name, change)
        self.writer[(namespace, kind, name)] = "tagpin"
        written = change.image
        actor = self.world.baton.log[-1][0]  # the actor making this call (one runs at a time)
        suspect = self.world.suspects.get(name)
        if suspect is not None and suspect[0] == actor and suspect[1] != written:
            del self.world.suspects[name]
            return  # the patch that landed on a hold, put back by the actor that made it
        st = self.world.store.targets.get(target(name).id)
        now = self.world.clock.now
        if (st is not None and st.holds(written.rpartition("@")[2], now)) or (
            st is not None and st.holds("", now) and st.held_digest == ""
        ):
            # A hold written after the applier's last read of its claim cannot stop its patch (the
            # hold changes no resourceVersion): the applier must put the image back before it
            # ends: a violation once that actor ended without doing so (the invariant below).
            self.world.suspects[name] = (
                actor,
                written,
                f"{name}: patched to {written} while held ({st.detail})",
            )

    def set_by_hand(self, name: str, image: str) -> None:
        self.world.suspects.pop(name, None)  # a person's change stands, whoever wrote before
        workload = self.items[key(name)]
        workload.containers[name] = image
        workload.resource_version = str(int(workload.resource_version) + 1)
        self.writer[key(name)] = "person"


class World:
    """The state table, the cluster, the actors' baton, and the oracle's findings."""

    def __init__(self, dynamodb: Any) -> None:
        table = f"state-{next(TABLES)}"
        create_table(dynamodb, table, ("pk", "sk"))
        self.store: State = dynamodb_state(SerializedClient(dynamodb), table)
        self.clock = FakeClock(1_800_000_000_000, step=1_000)
        self.cluster = WhoWroteCluster(self)
        self.baton = Baton()
        self.actors = itertools.count()
        self.violations: list[str] = []
        # a patch that landed on a hold: name -> (its actor, the image written, the finding)
        self.suspects: dict[str, tuple[str, str, str]] = {}
        self.followed = {APP: FollowedImage(image=APP, targets=[target(n) for n in NAMES])}

    def applied(self, digest: str, previous: str | None = None) -> None:
        """The tag at ``digest``, which tagpin applied to both targets (``previous``: what it replaced)."""
        self.store.tags.record(APP, digest, self.clock(), Trigger.POLL)
        for name in NAMES:
            self.cluster.items[key(name)].containers[name] = f"{APP}@{digest}"
            t = target(name).id
            assert self.store.targets.claim(t, APP, digest, self.clock(), Trigger.POLL, self.clock())
            self.store.targets.finish(
                t, digest, TargetStatus.APPLIED, self.clock(), trigger="poll", previous_image=previous
            )

    # -- actors --------------------------------------------------------------------------------------
    def _name(self, what: str) -> str:
        return f"{what}-{next(self.actors)}"

    def _clusters(self, actor: str) -> Any:
        return self.baton.wrap(FakeClusters(east=self.cluster), actor)

    def reconcile(self) -> str:
        actor = self._name("reconcile")
        state = self.baton.wrap_state(self.store, actor)
        holds = state.targets
        world = self

        class Checked:  # the oracle, at the moment of each hold the reconciler makes
            def __getattr__(_, name: str) -> Any:
                return getattr(holds, name)

            def hold(_, target_id: str, *args: Any, **kwargs: Any) -> bool:
                held = holds.hold(target_id, *args, **kwargs)
                name = target_id.split("/")[3]
                if held and world.cluster.writer[key(name)] != "person":
                    world.violations.append(
                        f"{target_id}: held, but tagpin wrote it last; the calls, last first: "
                        + "; ".join(f"{a} {c}" for a, c in reversed(world.baton.log[-40:]))
                    )
                return held

        state = State(**{**state.__dict__, "targets": Checked()})
        reconciler = Reconciler(
            config=lambda: CONFIG,
            state=state,
            clusters=self._clusters(actor),
            detector=Detector(ScriptedRegistry({}), state, ListQueue(), clock=self.clock, confirm_delays=()),
            queue=ListQueue(),
            clock=self.clock,
            concurrency=1,
            resolve=False,
        )
        self.baton.start(actor, lambda: reconciler.run(actor))
        return actor

    def apply(self, name: str, digest: str, observed_at: int) -> str:
        actor = self._name(f"apply-{name}")
        applier = Applier(
            followed=lambda: self.followed,
            state=self.baton.wrap_state(self.store, actor),
            workloads=self._clusters(actor),
            clock=self.clock,
        )
        t = target(name)
        change = TargetChange.of(
            t, Move(image=APP, digest=digest, observed_at=observed_at, trigger=Trigger.POLL)
        )
        self.baton.start(actor, lambda: applier.apply_target(change))
        return actor

    def roll_back(self, name: str) -> str | None:
        """A verification of what ``name`` was applied finds its rollout failed: rolled back."""
        applied = self.store.targets.get(target(name).id)
        if applied is None or applied.status is not TargetStatus.APPLIED:
            return None
        actor = self._name(f"rollback-{name}")
        state = self.baton.wrap_state(self.store, actor)
        rollout = RolloutSettings()
        verifier = Verifier(
            state=state,
            workloads=self._clusters(actor),
            followed=lambda: self.followed,
            settings=lambda: rollout,
            verifications=ListVerificationQueue(),
            promoter=Promoter(
                state=state,
                followed=lambda: self.followed,
                settings=lambda: rollout,
                verifications=ListVerificationQueue(),
                changes=ListQueue(),
                notifier=None,
                clock=self.clock,
            ),
            notifier=None,
            clock=self.clock,
        )
        verification = Verification(
            kind=VerificationKind.VERIFY,
            move=Move(
                image=APP, digest=applied.digest, observed_at=applied.observed_at, trigger=Trigger.POLL
            ),
            target_id=target(name).id,
            applied_at=applied.updated_at,
        )
        self.baton.start(actor, lambda: verifier.verify(verification))
        return actor

    def step_until(self, actor: str, call: str) -> None:
        """Step ``actor`` until it has made ``call`` (``Type.method`` of a port): it is parked before
        its next call then."""
        while True:
            assert actor not in self.baton.done, f"{actor} ended before {call}"
            self.baton.step(actor)
            if self.baton.log[-1] == (actor, call):
                return

    def park_before(self, actor: str, call: str) -> None:
        """Step ``actor`` until it is parked before ``call``."""
        while self.baton.parked_at(actor) != call:
            assert actor not in self.baton.done, f"{actor} ended before {call}"
            self.baton.step(actor)


class Interleavings(RuleBasedStateMachine):
    dynamodb: Any = None  # set by the test: moto's client

    def __init__(self) -> None:
        super().__init__()
        self.world = World(self.dynamodb)
        self.world.applied(D0)
        self.digest = D0
        self.moved = [D0]

    @property
    def store(self) -> State:
        return self.world.store

    @rule()
    def start_reconcile(self) -> None:
        self.world.reconcile()

    @rule(back=st.booleans())
    def tag_moves(self, back: bool) -> None:
        """The poller saw the tag move (forward, or back to a digest it had: plain tags can): the
        consumer starts applying it to both targets."""
        if back and len(self.moved) > 1:
            self.digest = self.moved[-2]
        elif self.digest == DIGESTS[-1]:
            return
        else:
            self.digest = DIGESTS[DIGESTS.index(self.digest) + 1] if self.digest in DIGESTS else DIGESTS[0]
        self.moved.append(self.digest)
        recorded = self.store.tags.record(APP, self.digest, self.world.clock(), Trigger.POLL)
        for name in NAMES:
            self.world.apply(name, recorded.current.digest, recorded.current.observed_at)

    @rule(name=st.sampled_from(NAMES))
    def verification_fails(self, name: str) -> None:
        self.world.roll_back(name)

    @rule(name=st.sampled_from(NAMES), image=st.sampled_from(BY_HAND))
    def a_person_sets_the_image(self, name: str, image: str) -> None:
        self.world.cluster.set_by_hand(name, image)

    @rule(name=st.sampled_from(NAMES))
    def a_person_holds(self, name: str) -> None:  # `tagpin hold`: where it is, against any digest
        now = self.world.clock()
        self.store.targets.hold(target(name).id, "", now, reason="held by a person", trigger=Trigger.MANUAL)

    @rule(name=st.sampled_from(NAMES))
    def a_person_releases(self, name: str) -> None:
        now = self.world.clock()
        self.store.targets.release(target(name).id, now, reason="released", trigger=Trigger.MANUAL)

    @precondition(lambda self: bool(self.world.baton.live()))
    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        self.world.baton.step(data.draw(st.sampled_from(self.world.baton.live()), label="actor"))

    @precondition(lambda self: not self.world.baton.live())
    @rule()
    def a_quiet_reconcile_holds_what_a_person_changed(self) -> None:
        tag = self.store.tags.get(APP)
        assert tag is not None
        before = self.store.targets.get_many([target(n).id for n in NAMES])
        changed = {
            name
            for name in NAMES
            if self.world.cluster.writer[key(name)] == "person"
            and not self.world.cluster.image("shop", Kind.DEPLOYMENT, name, name).endswith("@" + tag.digest)
            and before[target(name).id].settled_at(tag.digest)
            and before[target(name).id].status is not TargetStatus.HELD
            and not tag.blocked
        }
        actor = self.world.reconcile()
        report = self.world.baton.finish(actor)
        assert not isinstance(report, BaseException), report
        assert {t.split("/")[3] for t in report.held} == changed

    @invariant()
    def no_false_hold_and_no_patch_over_a_hold(self) -> None:
        assert self.world.violations == [], self.world.violations
        ended = [
            finding for actor, _, finding in self.world.suspects.values() if actor in self.world.baton.done
        ]
        assert ended == [], ended

    @invariant()
    def no_actor_failed(self) -> None:
        failed = {a: r for a, r in self.world.baton.done.items() if isinstance(r, AssertionError)}
        assert failed == {}, failed

    def teardown(self) -> None:
        self.world.baton.finish_all()
        assert self.world.violations == [], self.world.violations
        assert self.world.suspects == {}, self.world.suspects


def test_generated_interleavings(dynamodb: Any) -> None:
    Interleavings.dynamodb = dynamodb
    run_interleavings(Interleavings, examples=40, steps=30)


# -- the interleavings each confirmation step exists for ------------------------------------------


@pytest.fixture
def world(dynamodb: Any) -> World:
    return World(dynamodb)


def test_step_1_a_listing_taken_before_tagpins_patch(world: World) -> None:
    world.applied(D0)
    reconcile = world.reconcile()
    world.step_until(reconcile, "WhoWroteCluster.workloads")  # Deployments listed: both at D0
    recorded = world.store.tags.record(APP, DIGESTS[0], world.clock(), Trigger.POLL)
    for name in NAMES:
        world.baton.finish(world.apply(name, DIGESTS[0], recorded.current.observed_at))
    assert world.baton.finish(reconcile).held == []  # the states say applied, the GET shows it
    assert world.violations == []


def test_step_2_a_restore_by_another_targets_rollback(world: World) -> None:
    """The reconciler lists at D1, the tag moves to D2 and tagpin applies it, the reconciler reads
    D2's states (applied) and is about to look again. ``web``'s rollout of D2 fails; its rollback
    restores ``api`` to D1 first: the GET shows api at D1, its state still applied at D2. Only the
    tag, read again (marked bad), shows it was tagpin's write."""
    world.applied(DIGESTS[0])
    reconcile = world.reconcile()
    world.park_before(reconcile, "DynamoTags.get_many")  # listed at D1
    moved = world.store.tags.record(APP, DIGESTS[1], world.clock(), Trigger.POLL)
    for name in NAMES:
        world.baton.finish(world.apply(name, DIGESTS[1], moved.current.observed_at))
    world.park_before(reconcile, "WhoWroteCluster.get")  # tag D2, states applied at D2: candidates
    rollback = world.roll_back("web")
    assert rollback is not None
    world.step_until(rollback, "WhoWroteCluster.set_image")  # api (the other target first) restored
    assert world.cluster.image("shop", Kind.DEPLOYMENT, "api", "api").endswith(DIGESTS[0])
    assert world.store.targets.get(target("api").id).status is TargetStatus.APPLIED  # type: ignore[union-attr]
    assert world.baton.finish(reconcile).held == []
    world.baton.finish(rollback)
    assert world.violations == []


def test_step_3_the_tag_moved_and_came_back_while_the_reconciler_looked(world: World) -> None:
    """A person set web to D0; the reconciler lists it and reads its state (applied at D1). Then the
    tag moves to D2 and tagpin patches web (over the person's edit, as a moved tag does), and the
    tag comes back to D1: the GET shows tagpin's D2, the tag reads D1 again. Only the condition on
    the state read refuses the hold."""
    world.applied(DIGESTS[0])
    world.cluster.set_by_hand("web", f"{APP}@{D0}")
    reconcile = world.reconcile()
    world.park_before(reconcile, "WhoWroteCluster.get")  # web is a candidate
    moved = world.store.tags.record(APP, DIGESTS[1], world.clock(), Trigger.POLL)
    world.baton.finish(world.apply("web", DIGESTS[1], moved.current.observed_at))
    world.step_until(reconcile, "WhoWroteCluster.get")  # shows D2, tagpin's
    world.store.tags.record(APP, DIGESTS[0], world.clock(), Trigger.POLL)  # the tag is back at D1
    assert world.baton.finish(reconcile).held == []
    assert world.violations == []


def test_a_person_changing_a_settled_target_in_any_way_is_held(world: World) -> None:
    """Pinned to another digest, or unpinned (whatever the pods run, or none: scaled to zero)."""
    for digest, image in zip(DIGESTS, (f"{APP}@{D0}", APP), strict=False):
        world.applied(digest)
        world.cluster.set_by_hand("web", image)
        report = world.baton.finish(world.reconcile())
        assert report.held == [target("web").id], image
        assert world.baton.finish(world.reconcile()).held == []  # once
        assert world.cluster.image("shop", Kind.DEPLOYMENT, "web", "web") == image  # not patched back
    assert world.violations == []


def test_a_hold_written_after_the_consumer_read_the_state_wins(world: World) -> None:
    world.applied(D0)
    recorded = world.store.tags.record(APP, DIGESTS[0], world.clock(), Trigger.POLL)
    apply = world.apply("web", DIGESTS[0], recorded.current.observed_at)
    world.step_until(apply, "DynamoTargets.claim")  # claimed
    world.store.targets.hold(target("web").id, "", world.clock(), reason="held by a person", trigger="manual")
    world.baton.finish(apply)
    assert world.cluster.image("shop", Kind.DEPLOYMENT, "web", "web").endswith(D0)
    assert world.store.targets.get(target("web").id).status is TargetStatus.HELD  # type: ignore[union-attr]
    # and before the claim: never claimed
    apply = world.apply("web", DIGESTS[0], recorded.current.observed_at)
    assert world.baton.finish(apply).outcome == "superseded"
    assert world.violations == []


def test_a_hold_written_after_the_verifier_read_the_states_wins_over_its_rollback(world: World) -> None:
    """``web``'s rollout of D2 fails: its rollback would restore ``api`` to D1 too, but a person holds
    api after the verifier read the states: api stays where the person held it."""
    world.applied(DIGESTS[0])
    world.applied(DIGESTS[1], previous=f"{APP}@{DIGESTS[0]}")
    rollback = world.roll_back("web")
    assert rollback is not None
    world.step_until(rollback, "DynamoTargets.get_many")  # the states read: api applied at D2
    world.park_before(rollback, "WhoWroteCluster.get")  # about to restore api (the other target first)
    api = target("api").id
    assert world.store.targets.hold(api, "", world.clock(), reason="held by a person", trigger="manual")
    world.baton.finish(rollback)
    assert world.cluster.image("shop", Kind.DEPLOYMENT, "api", "api").endswith(DIGESTS[1])
    assert world.store.targets.get(api).status is TargetStatus.HELD  # type: ignore[union-attr]
    assert world.cluster.image("shop", Kind.DEPLOYMENT, "web", "web").endswith(DIGESTS[0])  # restored
    assert world.violations == []


def test_a_hold_between_the_claims_last_read_and_the_patch_is_kept(world: World) -> None:
    """Found by the generated interleavings: a person holds ``web`` after the applier read its claim
    (pending) and before its PATCH lands. The hold changes no resourceVersion, so the PATCH goes
    through; the applier then finds its claim no longer pending, puts the image the container ran
    back, and leaves the hold recorded (it once wrote "applied" over it)."""
    world.applied(D0)
    moved = world.store.tags.record(APP, DIGESTS[0], world.clock(), Trigger.POLL)
    apply = world.apply("web", DIGESTS[0], moved.current.observed_at)
    world.park_before(apply, "WhoWroteCluster.set_image")
    world.store.targets.hold(
        target("web").id, "", world.clock(), reason="held by a person", trigger=Trigger.MANUAL
    )
    result = world.baton.finish(apply)
    assert not isinstance(result, BaseException), result
    assert result.outcome is ApplyOutcome.HELD
    assert world.cluster.image("shop", Kind.DEPLOYMENT, "web", "web") == f"{APP}@{D0}"
    state = world.store.targets.get(target("web").id)
    assert state is not None and state.status is TargetStatus.HELD and state.detail == "held by a person"
    assert world.violations == [] and world.suspects == {}
