"""A person's hold that lands while tagpin patches is kept, even when the consumer stops between its
PATCH and its put-back (``tagpin.usecases.interrupted``).

The real use cases run as actors, one port call at a time in an order the test chooses
(``tests.support.interleave``): consumers (claim, GET, claim read again, PATCH, finish, put-back),
each may stop before any call (a timeout, a crash) and its message come back, and the reconciler;
the API server may refuse any one PATCH (RBAC, an admission webhook: a failure recorded).
People act between any two calls: hold (`tagpin hold`), set the image while holding, release.

Once settled (every actor ended, every claim too old to patch, a reconcile run), a held target runs
what it ran before the moves the hold stopped: written over a claim, the image the first patch of
the claims in flight then replaced (since the last outcome recorded, or a person's edit: theirs
stands), else its image then (a hold written once ``applied`` was recorded keeps the new digest),
unless a person set another since (their decision stands). A
hold stays until released; no digest is patched twice without a release between; tagpin writes a
held workload only to put back what the hold asked for. One write of a put-back may land after the
hold's release: a release between the put-back's last read of the hold and its PATCH (the hold is a
row in the state table, the workload an object of the Kubernetes API: nothing writes both as one).
A put-back reads the hold again after each read of the workload, so that window is the one call
before its PATCH: a release before it (before or after its GET) stands.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.config import FollowedImage, Kind, Target, parse_config
from tagpin.domain.messages import TargetChange, Trigger
from tagpin.domain.moves import Move
from tagpin.ports.state import State, TargetState, TargetStatus
from tagpin.ports.workloads import Forbidden, ImageChange, Workload
from tagpin.usecases.apply import Applier
from tagpin.usecases.detect import Detector
from tagpin.usecases.interrupted import CLAIM_LIFETIME_MS
from tagpin.usecases.reconcile import Reconciler, ReconcileReport

from tests.support.aws import create_table
from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0, FOLLOW
from tests.support.interleave import Baton, run_interleavings
from tests.support.queues import ListQueue
from tests.support.registry import ScriptedRegistry
from tests.unit.conftest import SerializedClient

APP = "reg.example.com/team/app:stable"
DIGESTS = [f"sha256:{c * 64}" for c in "abcd"]
BY_HAND = [f"{APP}@{D0}", f"{APP}@sha256:{'9' * 64}", APP]  # what a person may set while holding
CONFIG = parse_config("clusters:\n  east: {kubeconfig: {file: /dev/null}}\nimages: []\n")
WEB = Target(cluster="east", namespace="shop", kind=Kind.DEPLOYMENT, name="web", container="web")
KEY = ("shop", Kind.DEPLOYMENT, "web")
TABLES = itertools.count()


class Stopped(BaseException):
    """A consumer stopped (a Lambda timeout, a crash): it makes no call after."""


class Stoppable:
    """An actor's port: raises ``Stopped`` once the actor is stopped; notes the time of its claim."""

    def __init__(self, port: Any, world: World, actor: str) -> None:
        self._port, self._world, self._actor = port, world, actor

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._port, attribute)
        if attribute.startswith("_") or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._actor in self._world.stopped:
                raise Stopped(self._actor)
            result = value(*args, **kwargs)
            if attribute == "claim" and result:
                self._world.claims[self._actor] = args[5]
            if isinstance(result, TargetState):  # the target as this actor last read it
                self._world.last_read[self._actor] = result
            return result

        return call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # the connector: cluster name -> port
        return stoppable(self._port(*args, **kwargs), self._world, self._actor)


def stoppable(port: Any, world: World, actor: str) -> Any:
    """``Stoppable`` under the port's own class name (the baton logs calls by it)."""
    return type(type(port).__name__, (Stoppable,), {})(port, world, actor)


@dataclass
class Hold:
    at_image: str  # what the workload ran when it was written
    over_claim: int | None  # the claim's time, when written over a claim (pending)
    claims: frozenset[int] = frozenset()  # over a claim: the claims of the moves in flight it stops
    by_hand: str | None = None  # a person's image set since


PERSON = "person"  # the actor of a patch a person made by hand


class Patch(NamedTuple):
    actor: str
    digest: str
    replaced: str


@dataclass
class Oracle:
    hold: Hold | None = None
    patches: list[Patch] = field(default_factory=list)  # tagpin's forward patches, in order
    since_release: set[str] = field(default_factory=set)  # digests patched since the last release
    violations: list[str] = field(default_factory=list)
    released: str | None = None  # what the hold last released asked for

    def expected(self, claims: dict[str, int]) -> str | None:
        """What the held target must run once settled (None: not held)."""
        hold = self.hold
        if hold is None:
            return None
        if hold.by_hand is not None:
            return hold.by_hand
        stopped = hold.claims | ({hold.over_claim} if hold.over_claim is not None else set())
        if stopped:  # the hold stops every move in flight, from the first
            first = None
            for patch in self.patches:
                if patch.actor == PERSON:  # a person's edit stands: the moves after it undo to it
                    first = None
                elif first is None and claims.get(patch.actor) in stopped:
                    first = patch.replaced  # the first patch of the moves in flight
            if first is not None:
                return first
        return hold.at_image


class Cluster(FakeCluster):
    """One Deployment; every write of tagpin's is checked against the oracle as it lands."""

    def __init__(self, world: World) -> None:
        web = {"web": f"{APP}@{D0}"}
        super().__init__([Workload("1", web, namespace="shop", name="web", labels=dict(FOLLOW))])
        self.world = world
        self.refuse_next = False

    def set_image(self, namespace: str, kind: Kind, name: str, change: ImageChange) -> None:
        before = self.image(*KEY, "web")
        if self.refuse_next:  # the API server refuses this one PATCH (RBAC, an admission webhook)
            self.refuse_next = False
            raise Forbidden("patch is forbidden")
        super().set_image(namespace, kind, name, change)
        world, oracle = self.world, self.world.oracle
        actor = world.baton.log[-1][0]  # the actor making this call (one runs at a time)
        digest = world.digest_of.get(actor)
        if digest is not None and change.image.endswith("@" + digest) and before != change.image:
            if digest in oracle.since_release:
                oracle.violations.append(f"{actor}: {digest} patched twice without a release between")
            oracle.since_release.add(digest)
            oracle.patches.append(Patch(actor, digest, before))
            return
        # a put-back (the consumer's, or the reconciler's): only to what the hold asked for
        wanted = oracle.expected(world.claims)
        if wanted is not None and change.image == wanted:
            return
        # A release that lands after the put-back's last read of the hold and before its PATCH: the
        # hold (a row in the state table) and the workload (the Kubernetes API) cannot be written
        # as one, so the put-back the hold asked for still lands (the target is pending again and
        # the tag's digest comes back with the next delivery or reconcile). Only that one: the
        # put-back read the hold, over a claim, in its call just before this PATCH (after its GET).
        seen = world.last_read.get(actor)
        calls = [call for who, call in world.baton.log if who == actor]
        if (
            wanted is None
            and seen is not None
            and seen.stopped_claims()
            and calls[-2:-1] == ["DynamoTargets.get"]
            and change.image == oracle.released
        ):
            return
        oracle.violations.append(f"{actor}: wrote {change.image} over {before}; the hold asked {wanted}")

    def set_by_hand(self, image: str) -> None:
        workload = self.items[KEY]
        workload.containers["web"] = image
        workload.resource_version = str(int(workload.resource_version) + 1)


class World:
    def __init__(self, dynamodb: Any) -> None:
        table = f"state-{next(TABLES)}"
        create_table(dynamodb, table, ("pk", "sk"))
        self.store: State = dynamodb_state(SerializedClient(dynamodb), table)
        self.clock = FakeClock(1_800_000_000_000, step=1_000)
        self.oracle = Oracle()
        self.cluster = Cluster(self)
        self.baton = Baton()
        self.actors = itertools.count()
        self.stopped: set[str] = set()
        self.claims: dict[str, int] = {}  # consumer actor -> its claim's time
        self.last_read: dict[str, TargetState] = {}  # actor -> the target as it last read it
        self.digest_of: dict[str, str] = {}  # consumer actor -> the digest it applies
        self.changes: dict[str, TargetChange] = {}
        self.followed = {APP: FollowedImage(image=APP, targets=[WEB])}
        self.store.tags.record(APP, D0, self.clock(), Trigger.POLL)
        assert self.store.targets.claim(WEB.id, APP, D0, self.clock(), Trigger.POLL, self.clock())
        self.store.targets.finish(WEB.id, D0, TargetStatus.APPLIED, self.clock(), trigger=Trigger.POLL)

    def image(self) -> str:  # what web's container runs
        return self.cluster.image(*KEY, "web")

    def state(self) -> TargetState:  # web's state, as stored
        state = self.store.targets.get(WEB.id)
        assert state is not None
        return state

    # -- actors --------------------------------------------------------------------------------------
    def _ports(self, actor: str) -> tuple[State, Any]:
        fields = dataclasses.fields(self.store)
        state = State(**{f.name: stoppable(getattr(self.store, f.name), self, actor) for f in fields})
        return self.baton.wrap_state(state, actor), self.baton.wrap(
            stoppable(FakeClusters(east=self.cluster), self, actor), actor
        )

    def apply(self, change: TargetChange) -> str:
        """A consumer applies ``change`` (a message, or the same message delivered again)."""
        actor = f"apply-{next(self.actors)}"
        state, clusters = self._ports(actor)
        applier = Applier(followed=lambda: self.followed, state=state, workloads=clusters, clock=self.clock)
        self.digest_of[actor] = change.move.digest
        self.changes[actor] = change
        self.baton.start(actor, lambda: applier.apply_target(change))
        return actor

    def move(self, digest: str) -> str:
        recorded = self.store.tags.record(APP, digest, self.clock(), Trigger.POLL)
        move = Move(image=APP, digest=digest, observed_at=recorded.current.observed_at, trigger=Trigger.POLL)
        return self.apply(TargetChange.of(WEB, move))

    def reconcile(self) -> ReconcileReport:
        actor = f"reconcile-{next(self.actors)}"
        state, clusters = self._ports(actor)
        reconciler = Reconciler(
            config=lambda: CONFIG,
            state=state,
            clusters=clusters,
            detector=Detector(ScriptedRegistry({}), state, ListQueue(), clock=self.clock, confirm_delays=()),
            queue=ListQueue(),
            clock=self.clock,
            concurrency=1,
            resolve=False,
        )
        self.baton.start(actor, lambda: reconciler.run(actor))
        report = self.baton.finish(actor)
        assert isinstance(report, ReconcileReport), report
        return report

    def park(self, actor: str, call: str) -> None:
        while self.baton.parked_at(actor) != call:
            self.baton.step(actor)

    def stop(self, actor: str) -> None:
        """``actor`` stops before the call it is parked at."""
        self.stopped.add(actor)
        result = self.baton.finish(actor)
        assert isinstance(result, Stopped), result

    # -- people --------------------------------------------------------------------------------------
    def hold(self) -> bool:
        before = self.store.targets.get(WEB.id)
        held = self.store.targets.hold(WEB.id, "", self.clock(), reason="held by a person", trigger="manual")
        if held and before is not None:
            pending = before.status is TargetStatus.PENDING
            # over a claim, or over a failure of one (the claims made before it still in flight)
            self.oracle.hold = Hold(self.image(), before.updated_at if pending else None, before.claims)
        return held

    def release(self) -> None:
        if self.store.targets.release(WEB.id, self.clock(), reason="released", trigger=Trigger.MANUAL):
            self.oracle.released = self.oracle.expected(self.claims)
            self.oracle.hold = None
            self.oracle.since_release.clear()

    def set_by_hand(self, image: str) -> None:
        assert self.oracle.hold is not None
        self.oracle.patches.append(Patch(PERSON, "", self.image()))
        self.cluster.set_by_hand(image)
        self.oracle.hold.by_hand = image

    # -- settled -------------------------------------------------------------------------------------
    def settle(self) -> None:
        """Every actor ends, every claim is past the time it could still patch, the reconciler runs
        (a refusal still waiting for a PATCH is gone: a run it failed would be followed by another)."""
        self.baton.finish_all()
        self.cluster.refuse_next = False
        self.clock.advance(CLAIM_LIFETIME_MS)
        self.reconcile()

    def check(self) -> None:
        """The invariants, once settled."""
        assert self.oracle.violations == [], self.oracle.violations
        failed = {a: r for a, r in self.baton.done.items() if isinstance(r, AssertionError)}
        assert failed == {}, failed
        wanted = self.oracle.expected(self.claims)
        if wanted is None:
            return
        state = self.store.targets.get(WEB.id)
        assert state is not None and state.status is TargetStatus.HELD, f"the hold is gone: {state}"
        assert state.stopped_claims() == frozenset(), state  # every hold over claims settled
        assert self.image() == wanted, (self.oracle, self.baton.log[-30:])


class Interleavings(RuleBasedStateMachine):
    dynamodb: Any = None  # set by the test: moto's client

    def __init__(self) -> None:
        super().__init__()
        self.world = World(self.dynamodb)
        self.next = 0

    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        """Mostly an actor's next call (a hold, a stop land between any two), else the tag moves, a
        consumer stops or its message comes back, a person acts, or the reconciler runs."""
        world = self.world
        live = world.baton.live()
        stopped = sorted(a for a in world.changes if a in world.stopped)
        options = ["hold", "release", "reconcile"]
        options += ["move"] * (self.next < len(DIGESTS))
        options += ["step"] * 6 + ["stop"] if live else []
        options += ["again"] if stopped else []
        options += ["by_hand"] if world.oracle.hold is not None else []
        options += ["refuse"] if live else []
        action = data.draw(st.sampled_from(options), label="action")
        if action == "move":
            world.move(DIGESTS[self.next])
            self.next += 1
        elif action == "step":
            world.baton.step(data.draw(st.sampled_from(live), label="actor"))
        elif action == "stop":
            world.stop(data.draw(st.sampled_from(live), label="stopped"))
        elif action == "again":  # SQS delivers a stopped consumer's message again
            world.apply(world.changes[data.draw(st.sampled_from(stopped), label="message")])
        elif action == "hold":
            world.hold()
        elif action == "by_hand":
            world.set_by_hand(data.draw(st.sampled_from(BY_HAND), label="image"))
        elif action == "refuse":  # the next PATCH, whoever sends it, is refused
            world.cluster.refuse_next = True
        elif action == "release":
            world.release()
        else:
            world.reconcile()

    @invariant()
    def tagpin_writes_a_held_workload_only_to_put_back(self) -> None:
        assert self.world.oracle.violations == [], self.world.oracle.violations

    def teardown(self) -> None:
        self.world.settle()
        self.world.check()


def test_generated_interleavings(dynamodb: Any) -> None:
    Interleavings.dynamodb = dynamodb
    run_interleavings(Interleavings, examples=40, steps=25)
