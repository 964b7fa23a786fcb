"""A digest that fails while a consumer's PATCH of it is on its way to another target: the rollback
(another target of the wave failed) finds that target not yet running the digest, records it
``failed`` and marks the digest bad; then the PATCH lands. The consumer must not leave the bad
digest running there, recorded ``applied`` (before: its second ``finish`` wrote ``applied`` over
the rollback's ``failed``, the target kept the bad digest, was verified on it, and the reconciler,
the tag being blocked, never healed it). The applier and the verifier on moto's DynamoDB and a
fake cluster whose PATCH of ``api`` waits until the rollback has run."""

from __future__ import annotations

from collections.abc import Callable

from tagpin.domain.config import FollowedImage, Kind, RolloutSettings, Target
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome, VerificationOutcome
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


class SlowPatch(FakeCluster):
    """The PATCH of ``api`` lands only after ``meanwhile`` ran (once)."""

    meanwhile: Callable[[], None] | None = None

    def set_image(self, namespace: str, kind: Kind, name: str, change: ImageChange) -> None:
        if name == "api" and self.meanwhile is not None:
            run, self.meanwhile = self.meanwhile, None
            run()
        super().set_image(namespace, kind, name, change)


def wire(
    store: State, cluster: FakeCluster, verifications: ListVerificationQueue
) -> tuple[Verifier, Applier]:
    """The verifier (with its promoter) and the applier on ``store`` and ``cluster`` (cluster "prod")."""
    clock = FakeClock(NOW, step=1)
    clusters = FakeClusters(prod=cluster)
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
    applier = Applier(
        followed=lambda: FOLLOWED,
        state=store,
        workloads=clusters,
        clock=clock,
        settings=lambda: SETTINGS,
        verifications=verifications,
    )
    return verifier, applier


def workloads() -> list[Workload]:
    """web, whose rollout fails, and api; both on D0."""
    failing = Kind.DEPLOYMENT.profile.rollout_health(1, {}, DEADLINE)
    return [
        Workload("1", {"app": f"{IMAGE}@{D0}"}, namespace="shop", name="web", rollout=failing),
        Workload("1", {"app": f"{IMAGE}@{D0}"}, namespace="shop", name="api"),
    ]


def change(store: State) -> Change:
    """D1, recorded for the tag: the change the consumer applies."""
    store.tags.record(IMAGE, D1, NOW, Trigger.POLL)
    return Change(move=Move(image=IMAGE, digest=D1, observed_at=NOW, trigger=Trigger.POLL))


def assert_both_back(store: State, cluster: FakeCluster) -> None:
    """D1 marked bad for the tag; web and api (where D1 landed) back on D0, api recorded so."""
    tag = store.tags.get(IMAGE)
    assert tag is not None and tag.blocked and tag.bad_digest == D1
    assert cluster.image("shop", Kind.DEPLOYMENT, "web", "app") == f"{IMAGE}@{D0}"
    assert cluster.image("shop", Kind.DEPLOYMENT, "api", "app") == f"{IMAGE}@{D0}"
    api = store.targets.get(API.id)
    assert api is not None and api.status is TargetStatus.ROLLED_BACK, api


def test_a_patch_landing_after_its_digest_was_rolled_back_does_not_leave_it_running(store: State) -> None:
    cluster = SlowPatch(workloads())
    verifications = ListVerificationQueue()
    verifier, applier = wire(store, cluster, verifications)
    rolled_back: list[VerificationOutcome] = []

    def web_fails() -> None:  # web's verification, due while api's PATCH is on its way
        [(verification, _delay)] = verifications.sent
        rolled_back.append(verifier.verify(verification).outcome)

    cluster.meanwhile = web_fails
    results = applier.apply(change(store))

    assert rolled_back == [VerificationOutcome.ROLLED_BACK]
    assert_both_back(store, cluster)
    # api: nor recorded applied, nor verified later
    by_target = {r.target: r.outcome for r in results}
    assert by_target[API.id] is not ApplyOutcome.PATCHED, results
    assert all(v.target_id != API.id for v, _ in verifications.sent), verifications.sent
