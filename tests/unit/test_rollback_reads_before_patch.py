"""The other order of a digest failing while a consumer's PATCH of it is on its way to another target
(``test_rollback_during_patch`` is the first): the rollback (another target of the wave failed)
reads that target's workload before the PATCH lands, so it finds nothing to undo; the PATCH lands
and the consumer records ``applied``; only then does the rollback record its ``failed``. Before,
that ``failed`` was written over ``applied`` and the target kept running the bad digest, recorded
failed (the tag blocked, the reconciler never healed it). The rollback's ``failed`` is now written
only over the state its decision read; when the target moved on meanwhile, it decides again from
what the target runs now and puts the image back.

Two threads (the consumer's and the verifier's), the order forced by events: the verifier's read of
``api`` answers only once the consumer has recorded ``applied`` (its verification sent)."""

from __future__ import annotations

import threading
from typing import Any

from tagpin.domain.config import FollowedImage, Kind, RolloutSettings, Target
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import VerificationOutcome
from tagpin.ports.state import State, TargetStatus
from tagpin.ports.workloads import ImageChange, Workload
from tagpin.usecases.apply import Applier
from tagpin.usecases.promote import Promoter
from tagpin.usecases.verify import Verifier

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0, D1
from tests.support.queues import ListQueue, ListVerificationQueue

IMAGE = "registry.example.com/team/app:stable"
WEB = Target(cluster="prod", namespace="shop", kind=Kind.DEPLOYMENT, name="web", container="app")
API = Target(cluster="prod", namespace="shop", kind=Kind.DEPLOYMENT, name="api", container="app")
FOLLOWED = {IMAGE: FollowedImage(image=IMAGE, targets=[WEB, API])}
SETTINGS = RolloutSettings(verify_interval_seconds=10, verify_timeout_seconds=60)
DEADLINE = {
    "observedGeneration": 10**6,
    "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
}
NOW = 1_800_000_000_000
WAIT_S = 10.0


class Steps:
    """The events that force the order, and what went wrong on the way (asserted empty)."""

    def __init__(self) -> None:
        self.api_patching = threading.Event()  # the consumer's PATCH of api is on its way
        self.read_api = threading.Event()  # the rollback has read api (not yet patched)
        self.api_applied = threading.Event()  # the consumer recorded api applied
        self.late: list[str] = []

    def wait(self, event: threading.Event, what: str) -> None:
        if not event.wait(WAIT_S):
            self.late.append(what)


class OrderedCluster(FakeCluster):
    """api's PATCH lands after the rollback's first read of api, which answers (what api ran before
    the PATCH) only once the consumer has recorded api applied."""

    steps: Steps
    verifier_thread: threading.Thread | None = None

    def get(self, namespace: str, kind: Kind, name: str) -> Workload:
        workload = super().get(namespace, kind, name)
        if (
            name == "api"
            and threading.current_thread() is self.verifier_thread
            and not self.steps.read_api.is_set()
        ):
            self.steps.read_api.set()
            self.steps.wait(self.steps.api_applied, "the consumer's applied")
        return workload

    def set_image(self, namespace: str, kind: Kind, name: str, change: ImageChange) -> None:
        ours = threading.current_thread() is not self.verifier_thread
        if name == "api" and ours and not self.steps.api_patching.is_set():
            self.steps.api_patching.set()
            self.steps.wait(self.steps.read_api, "the rollback's read of api")
        super().set_image(namespace, kind, name, change)


class Verifications(ListVerificationQueue):
    steps: Steps

    def send(self, verification: Any, delay_s: int) -> None:
        super().send(verification, delay_s)
        if verification.target_id == API.id:
            self.steps.api_applied.set()


def test_a_rollback_that_read_the_target_before_the_patch_landed_still_puts_it_back(store: State) -> None:
    clock = FakeClock(NOW, step=1)
    steps = Steps()
    failing = Kind.DEPLOYMENT.profile.rollout_health(1, {}, DEADLINE)
    cluster = OrderedCluster(
        [
            Workload("1", {"app": f"{IMAGE}@{D0}"}, namespace="shop", name="web", rollout=failing),
            Workload("1", {"app": f"{IMAGE}@{D0}"}, namespace="shop", name="api"),
        ]
    )
    cluster.steps = steps
    clusters = FakeClusters(prod=cluster)
    verifications = Verifications()
    verifications.steps = steps
    promoter = Promoter(
        state=store,
        followed=lambda: FOLLOWED,
        settings=lambda: SETTINGS,
        verifications=verifications,
        changes=ListQueue(),
        notifier=None,
        clock=clock,
    )
    verifier = Verifier(
        state=store,
        workloads=clusters,
        followed=lambda: FOLLOWED,
        settings=lambda: SETTINGS,
        verifications=verifications,
        promoter=promoter,
        notifier=None,
        clock=clock,
    )
    outcomes: list[VerificationOutcome] = []

    def web_fails() -> None:  # web's verification, due while api's PATCH is on its way
        steps.wait(steps.api_patching, "api's PATCH")
        [(verification, _delay)] = [(v, d) for v, d in verifications.sent if v.target_id == WEB.id]
        outcomes.append(verifier.verify(verification).outcome)

    verifying = threading.Thread(target=web_fails)
    cluster.verifier_thread = verifying
    store.tags.record(IMAGE, D1, NOW, Trigger.POLL)
    change = Change(move=Move(image=IMAGE, digest=D1, observed_at=NOW, trigger=Trigger.POLL))
    applier = Applier(
        followed=lambda: FOLLOWED,
        state=store,
        workloads=clusters,
        clock=clock,
        settings=lambda: SETTINGS,
        verifications=verifications,
    )
    verifying.start()
    applier.apply(change)
    verifying.join(WAIT_S * 3)

    assert not steps.late, f"the order was not the one this test forces: {steps.late}"
    assert outcomes == [VerificationOutcome.ROLLED_BACK]
    tag = store.tags.get(IMAGE)
    assert tag is not None and tag.blocked and tag.bad_digest == D1
    assert cluster.image("shop", Kind.DEPLOYMENT, "web", "app") == f"{IMAGE}@{D0}"
    # api: the bad digest that landed after the rollback's read is put back, and recorded so
    assert cluster.image("shop", Kind.DEPLOYMENT, "api", "app") == f"{IMAGE}@{D0}"
    api = store.targets.get(API.id)
    assert api is not None and api.status is TargetStatus.ROLLED_BACK, api
