"""A rollback never puts back a version a person held back: a channel downgraded by ``tagpin
downgrade`` whose downgraded version then fails its rollout. The channel stays on the failed
version, blocked (``Heads.roll_back``: nothing to return to); its targets are not patched back to
the version the person held back either (before: the verifier restored the image the downgrade's
patch replaced, the held-back version, and the workload ran what the person had downgraded from).
The use cases (poller, downgrade, applier, verifier) on moto's DynamoDB and a fake cluster."""

from __future__ import annotations

from tagpin.domain.config import FollowedImage, Kind, Registry, RolloutSettings, Target
from tagpin.domain.messages import Change
from tagpin.domain.outcomes import VerificationOutcome
from tagpin.ports.registry import OCI_MANIFEST
from tagpin.ports.state import State, TargetStatus
from tagpin.ports.workloads import Workload
from tagpin.usecases.apply import Applier
from tagpin.usecases.channels import Channels, Downgrades
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller
from tagpin.usecases.promote import Promoter
from tagpin.usecases.verify import Verifier

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.queues import ListQueue, ListVerificationQueue
from tests.support.registry import ScriptedRegistry

REPO = "registry.example/team/web"
TARGET = Target(cluster="prod", namespace="shop", kind=Kind.DEPLOYMENT, name="web", container="app")
STABLE = FollowedImage(image=REPO, policy="^1", channel="stable", targets=[TARGET])
FOLLOWED = {STABLE.image: STABLE}
SETTINGS = RolloutSettings(verify_interval_seconds=10, verify_timeout_seconds=60)
DEADLINE = {
    "observedGeneration": 10**6,
    "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
}
KEY = ("shop", Kind.DEPLOYMENT, "web")


def digest(n: int) -> str:
    return f"sha256:{n:064x}"


def test_a_failed_downgrade_is_not_rolled_back_to_the_version_held_back(store: State) -> None:
    scripted = ScriptedRegistry(
        {f"{REPO}:1.0.0": digest(1), f"{REPO}:1.1.0": digest(2)},
        media_type=OCI_MANIFEST,
        clock=FakeClock(1000.0),
    )
    queue = ListQueue()
    clock = FakeClock(2 * 10**12, step=1)
    cluster = FakeCluster([Workload("1", {"app": f"{REPO}:1.0.0@{digest(1)}"}, namespace="shop", name="web")])
    verifications = ListVerificationQueue()
    applier = Applier(
        followed=lambda: FOLLOWED,
        state=store,
        workloads=FakeClusters(prod=cluster),
        clock=clock,
        settings=lambda: SETTINGS,
        verifications=verifications,
    )
    Poller(
        Detector(scripted, store, queue),
        scripted,
        store,
        lambda _host: Registry(),
        monotonic=scripted.clock,
        channels=Channels(scripted, store),
    ).run([STABLE])
    assert [c.move.tag for c in queue.sent] == ["1.1.0"]
    applier.apply(queue.sent[-1])
    assert cluster.image(*KEY, "app") == f"{REPO}:1.1.0@{digest(2)}"

    # A person takes the channel back down to 1.0.0: 1.1.0 is held back.
    done = Downgrades(Channels(scripted, store), scripted, queue, clock).downgrade(STABLE, "1.0.0", "ana")
    assert done.held_back == ("1.1.0",)
    change = queue.sent[-1]
    assert isinstance(change, Change) and change.move.tag == "1.0.0"
    verifications.sent.clear()
    applier.apply(change)
    assert cluster.image(*KEY, "app") == f"{REPO}:1.0.0@{digest(1)}"
    [(verification, _delay)] = verifications.sent

    # 1.0.0 does not roll out (its deadline passes): it fails, and is not rolled back to 1.1.0.
    cluster.items[KEY].rollout = Kind.DEPLOYMENT.profile.rollout_health(1, {}, DEADLINE)
    promoter = Promoter(
        state=store,
        followed=lambda: FOLLOWED,
        settings=lambda: SETTINGS,
        verifications=verifications,
        changes=queue,
        notifier=None,
        clock=clock,
    )
    result = Verifier(
        state=store,
        workloads=FakeClusters(prod=cluster),
        followed=lambda: FOLLOWED,
        settings=lambda: SETTINGS,
        verifications=verifications,
        promoter=promoter,
        notifier=None,
        clock=clock,
    ).verify(verification)

    assert result.outcome is VerificationOutcome.FAILED, result
    assert cluster.image(*KEY, "app") == f"{REPO}:1.0.0@{digest(1)}"  # not the held-back 1.1.0
    st = store.targets.get(TARGET.id)
    assert st is not None and st.status is TargetStatus.FAILED and st.digest == digest(1)
    failed = [e.detail or "" for e in store.history.of_image(STABLE.image) if e.event == "failed"]
    assert any(d.endswith("restored: none") for d in failed), failed
    head = store.tags.get(STABLE.image)
    assert head is not None and (head.version, head.digest) == ("1.0.0", digest(1))  # blocked there
