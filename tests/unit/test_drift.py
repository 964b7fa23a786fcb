"""tagpin never takes its own write for a person's change (``tagpin.usecases.drift``).

A hypothesis state machine runs the real use cases as actors, one port call at a time in an order
it generates (``tests.support.interleave``): the reconciler (LIST, state reads, GET, hold), the
consumer applying a digest (claim, GET, PATCH, finish), the verifier rolling a failed digest back
(mark bad, GET, PATCH the previous image, finish) and a person setting an image by hand, on two
Deployments of one tag, with the state table on moto. The cluster knows who wrote each container
last. Invariants:

- safety: whenever the reconciler puts a target on hold, a person was the last to set its image
  (a listing taken before tagpin's own patch or restore never counts);
- liveness: a reconcile run on its own, after a person changed a target tagpin had settled at the
  tag's digest, holds it.
"""

from __future__ import annotations

import copy
import itertools
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.config import FollowedImage, Kind, RolloutSettings, Target, parse_config
from tagpin.domain.messages import TargetChange, Trigger, Verification, VerificationKind
from tagpin.ports.state import State, TargetStatus
from tagpin.ports.workloads import Workload
from tagpin.usecases.apply import Applier
from tagpin.usecases.detect import Detector
from tagpin.usecases.promote import Promoter
from tagpin.usecases.reconcile import Reconciler
from tagpin.usecases.verify import Verifier

from tests.support.aws import create_table
from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters, Key
from tests.support.constants import D0, FOLLOW
from tests.support.interleave import Baton
from tests.support.queues import ListQueue, ListVerificationQueue
from tests.support.registry import ScriptedRegistry
from tests.unit.conftest import SerializedClient

APP = "reg.example.com/team/app:stable"
NAMES = ("web", "api")
DIGESTS = [f"sha256:{c * 64}" for c in "abcdef"]
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
    """A cluster that knows who set each workload's image last: tagpin (a PATCH) or a person."""

    def __init__(self) -> None:
        super().__init__(
            Workload(
                "1",
                {name: f"{APP}@{D0}"},
                namespace="shop",
                name=name,
                labels=dict(FOLLOW),
                selector={"matchLabels": {"app": name}},
                status=copy.deepcopy(FAILED_STATUS),  # every verification finds the rollout failed
            )
            for name in NAMES
        )
        self.writer: dict[Key, str] = {key(name): "tagpin" for name in NAMES}

    def patch(self, namespace: str, kind: Kind, name: str, body: dict[str, Any]) -> None:
        super().patch(namespace, kind, name, body)
        self.writer[(namespace, kind, name)] = "tagpin"

    def set_by_hand(self, name: str, digest: str) -> None:
        workload = self.items[key(name)]
        workload.containers[name] = f"{APP}@{digest}"
        workload.resource_version = str(int(workload.resource_version) + 1)
        self.writer[key(name)] = "person"


class Interleavings(RuleBasedStateMachine):
    dynamodb: Any = None  # set by the test: moto's client

    def __init__(self) -> None:
        super().__init__()
        table = f"state-{next(TABLES)}"
        create_table(self.dynamodb, table, ("pk", "sk"))
        self.store: State = dynamodb_state(SerializedClient(self.dynamodb), table)
        self.cluster = WhoWroteCluster()
        self.clock = FakeClock(1_800_000_000_000, step=1_000)
        self.baton = Baton()
        self.actors = itertools.count()
        self.false_holds: list[str] = []
        self.digest = D0
        self.store.tags.record(APP, D0, self.clock(), Trigger.POLL)
        for name in NAMES:  # tagpin had applied D0 to both
            assert self.store.targets.claim(target(name).id, APP, D0, 1, Trigger.POLL, self.clock())
            self.store.targets.finish(target(name).id, D0, TargetStatus.APPLIED, self.clock(), trigger="poll")
        self.followed = {APP: FollowedImage(image=APP, targets=[target(n) for n in NAMES])}

    # -- the actors --------------------------------------------------------------------------------
    def _clusters(self, actor: str) -> Any:
        return self.baton.wrap(FakeClusters(east=self.cluster), actor)

    def _reconciler(self, actor: str) -> Reconciler:
        state = self.baton.wrap_state(self.store, actor)
        holds = state.targets

        class Checked:  # the oracle, at the moment of each hold the reconciler makes
            def __getattr__(_, name: str) -> Any:
                return getattr(holds, name)

            def hold(_, target_id: str, *args: Any, **kwargs: Any) -> bool:
                held = holds.hold(target_id, *args, **kwargs)
                name = target_id.split("/")[3]
                if held and self.cluster.writer[key(name)] != "person":
                    self.false_holds.append(
                        f"{target_id}: held, but tagpin wrote it last; the calls, last first: "
                        + "; ".join(f"{a} {c}" for a, c in reversed(self.baton.log[-40:]))
                    )
                return held

        state = State(**{**state.__dict__, "targets": Checked()})
        return Reconciler(
            config=lambda: CONFIG,
            state=state,
            clusters=self._clusters(actor),
            detector=Detector(ScriptedRegistry({}), state, ListQueue(), clock=self.clock, confirm_delays=()),
            queue=ListQueue(),
            clock=self.clock,
            concurrency=1,
            resolve=False,
        )

    @rule()
    def start_reconcile(self) -> None:
        actor = f"reconcile-{next(self.actors)}"
        self.baton.start(actor, lambda: self._reconciler(actor).run(actor))

    @rule()
    def tag_moves(self) -> None:
        """The poller saw the tag move: the consumer starts applying it to both targets."""
        if self.digest == DIGESTS[-1]:
            return
        self.digest = DIGESTS[DIGESTS.index(self.digest) + 1] if self.digest in DIGESTS else DIGESTS[0]
        recorded = self.store.tags.record(APP, self.digest, self.clock(), Trigger.POLL)
        for name in NAMES:
            self.start_apply(name, recorded.current.digest, recorded.current.observed_at)

    def start_apply(self, name: str, digest: str, observed_at: int) -> None:
        actor = f"apply-{name}-{next(self.actors)}"
        applier = Applier(
            followed=lambda: self.followed,
            state=self.baton.wrap_state(self.store, actor),
            workloads=self._clusters(actor),
            clock=self.clock,
        )
        t = target(name)
        change = TargetChange(
            target_id=t.id,
            cluster=t.cluster,
            namespace=t.namespace,
            kind=t.kind.value,
            name=t.name,
            container=t.container,
            image=APP,
            digest=digest,
            observed_at=observed_at,
            trigger=Trigger.POLL,
        )
        self.baton.start(actor, lambda: applier.apply_target(change))

    @rule(name=st.sampled_from(NAMES))
    def verification_fails(self, name: str) -> None:
        """A verification of what the target was applied finds its rollout failed: rolled back."""
        applied = self.store.targets.get(target(name).id)
        if applied is None or applied.status is not TargetStatus.APPLIED:
            return
        actor = f"rollback-{name}-{next(self.actors)}"
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
            image=APP,
            digest=applied.digest,
            observed_at=applied.observed_at,
            target_id=target(name).id,
            applied_at=applied.updated_at,
            trigger=Trigger.POLL,
        )
        self.baton.start(actor, lambda: verifier.verify(verification))

    @rule(name=st.sampled_from(NAMES), digest=st.sampled_from([D0, *DIGESTS]))
    def a_person_sets_the_image(self, name: str, digest: str) -> None:
        self.cluster.set_by_hand(name, digest)

    @precondition(lambda self: bool(self.baton.live()))
    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        self.baton.step(data.draw(st.sampled_from(self.baton.live()), label="actor"))

    @precondition(lambda self: not self.baton.live())
    @rule()
    def a_quiet_reconcile_holds_what_a_person_changed(self) -> None:
        tag = self.store.tags.get(APP)
        assert tag is not None
        before = self.store.targets.get_many([target(n).id for n in NAMES])
        changed = {
            name
            for name in NAMES
            if self.cluster.writer[key(name)] == "person"
            and not self.cluster.image("shop", Kind.DEPLOYMENT, name, name).endswith(tag.digest)
            and before[target(name).id].settled_at(tag.digest)
            and before[target(name).id].status is not TargetStatus.HELD
            and not tag.blocked
        }
        actor = f"quiet-{next(self.actors)}"
        self.baton.start(actor, lambda: self._reconciler(actor).run(actor))
        report = self.baton.finish(actor)
        assert not isinstance(report, BaseException), report
        assert {t.split("/")[3] for t in report.held} == changed

    # -- invariants --------------------------------------------------------------------------------
    @invariant()
    def no_false_hold(self) -> None:
        assert self.false_holds == [], self.false_holds

    @invariant()
    def no_actor_failed(self) -> None:
        failed = {a: r for a, r in self.baton.done.items() if isinstance(r, AssertionError)}
        assert failed == {}, failed

    def teardown(self) -> None:
        self.baton.finish_all()
        assert self.false_holds == [], self.false_holds


def test_a_listing_older_than_tagpins_own_write_never_holds(dynamodb: Any) -> None:
    Interleavings.dynamodb = dynamodb
    run_state_machine_as_test(
        Interleavings,
        settings=settings(
            # ~1 s an example on 2 cores; TAGPIN_INTERLEAVINGS=1000 explores further
            max_examples=int(os.environ.get("TAGPIN_INTERLEAVINGS", "40")),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
