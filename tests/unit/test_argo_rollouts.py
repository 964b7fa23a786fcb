"""Argo Rollouts as a workload kind: the JSON patch the adapter sends for tagpin's change (pure; the
API server applies it in tests/integration/test_kube_adapter.py),
the health of each phase (pure), who rolls back (``Workload.manages_own_rollback``), and the
verifier with a fake cluster and the state table on moto: a paused canary waits, a degraded one
fails and marks the digest bad, and is not patched back."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin.adapters.kubernetes.jsonpatch import json_patch
from tagpin.adapters.kubernetes.workloads import workload_from
from tagpin.domain.config import FollowedImage, Kind, RolloutSettings, Target
from tagpin.domain.kinds import ImageChange, Progress
from tagpin.domain.messages import Trigger, Verification, VerificationKind
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import RestoreOutcome, VerificationOutcome
from tagpin.ports.state import PromotionStatus, State, TargetStatus
from tagpin.ports.workloads import Workload
from tagpin.usecases.patch import restore
from tagpin.usecases.promote import Promoter
from tagpin.usecases.verify import Verifier
from tagpin_local.kube.manifests import rollout

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters, served
from tests.support.constants import D0, D1
from tests.support.notify import RecordingNotifier
from tests.support.queues import ListQueue, ListVerificationQueue
from tests.support.trail import start_promotion

NOTES = {"tagpin.dev/digests": '{"app":"' + D1 + '"}', "tagpin.dev/trigger": "poll"}


def manifest(**template_metadata: Any) -> dict[str, Any]:
    obj = rollout("web", "shop", "nginx:1.27")
    pod = obj["spec"]["template"]
    pod["metadata"] = template_metadata
    pod["spec"]["initContainers"] = [{"name": "migrate", "image": "nginx:1.27"}]
    pod["spec"]["containers"].insert(
        0, {"name": "sidecar", "image": "envoy:1.30", "ports": [{"containerPort": 1}]}
    )
    obj["metadata"]["resourceVersion"] = "41"
    return obj


@pytest.mark.parametrize(
    "template_metadata",
    [
        pytest.param({"labels": {"app": "web"}}, id="no-annotations"),
        pytest.param(
            {"labels": {"app": "web"}, "annotations": {"team": "a", "tagpin.dev/trigger": "x"}}, id="some"
        ),
        pytest.param({}, id="empty-metadata"),
    ],
)
@pytest.mark.parametrize("container", ["app", "migrate"])
def test_the_json_patch_addresses_the_container_by_index_guarded_by_its_name(template_metadata, container):
    """What the API server then does with it, beside a strategic merge patch of a Deployment:
    tests/integration/test_kube_adapter.py."""
    current = manifest(**template_metadata)
    body = Kind.ROLLOUT.profile.patch_body(
        ImageChange("41", container, container == "migrate", f"nginx:1.27@{D1}", NOTES)
    )
    ops = json_patch(body, current)
    assert ops[-1] == {
        "op": "replace",
        "path": "/metadata/resourceVersion",
        "value": "41",
    }  # the precondition
    field = "initContainers" if container == "migrate" else "containers"
    index = 0 if container == "migrate" else 1
    assert {"op": "test", "path": f"/spec/template/spec/{field}/{index}/name", "value": container} in ops
    assert {
        "op": "replace",
        "path": f"/spec/template/spec/{field}/{index}/image",
        "value": f"nginx:1.27@{D1}",
    } in ops
    assert not any(op["path"].startswith("/spec/template/spec/containers/0") for op in ops)  # the sidecar


def test_annotation_keys_are_escaped_and_added_one_by_one_when_the_map_exists():
    current = manifest(annotations={"team": "a"})
    ops = json_patch(Kind.ROLLOUT.profile.patch_body(ImageChange("41", "app", False, "x", NOTES)), current)
    assert {
        "op": "add",
        "path": "/spec/template/metadata/annotations/tagpin.dev~1digests",
        "value": NOTES["tagpin.dev/digests"],
    } in ops
    assert not any(op["path"] == "/spec/template/metadata/annotations" for op in ops)  # "team" stays


def test_null_removes_a_new_item_is_appended_and_an_item_needs_a_name():
    current = manifest(annotations={"team": "a"})
    body = {
        "spec": {
            "template": {
                "metadata": {"annotations": {"team": None, "gone": None}},
                "spec": {"containers": [{"name": "new", "image": "busybox"}]},
            }
        }
    }
    ops = json_patch(body, current)
    assert ops == [
        {"op": "remove", "path": "/spec/template/metadata/annotations/team"},
        {
            "op": "add",
            "path": "/spec/template/spec/containers/-",
            "value": {"name": "new", "image": "busybox"},
        },
    ]  # no resourceVersion asked: no precondition
    with pytest.raises(ValueError, match="needs a name"):
        json_patch({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}, current)


# -- health of each phase ------------------------------------------------------------------------


def status(**fields: Any) -> dict[str, Any]:
    """A Rollout's status for generation 2, its new template (hash "new") stable."""
    return {
        "observedGeneration": "2",
        "phase": "Healthy",
        "currentPodHash": "new",
        "stableRS": "new",
        **fields,
    }


@pytest.mark.parametrize(
    ("fields", "progress", "reason"),
    [
        pytest.param({}, Progress.COMPLETE, "Healthy: ReplicaSet new is stable", id="healthy"),
        pytest.param({"observedGeneration": 2}, Progress.COMPLETE, "Healthy", id="healthy-int-generation"),
        pytest.param({"stableRS": "old"}, Progress.PROGRESSING, "still old", id="healthy-not-yet-stable"),
        pytest.param(
            {"observedGeneration": "1", "phase": "Degraded"},
            Progress.PROGRESSING,
            "waiting for the controller",
            id="the-previous-generation-s-phase",
        ),
        pytest.param(
            {"phase": "Progressing", "message": "more replicas need to be updated", "stableRS": "old"},
            Progress.PROGRESSING,
            "Progressing: more replicas need to be updated",
            id="progressing",
        ),
        pytest.param(
            {
                "phase": "Paused",
                "message": "CanaryPauseStep",
                "stableRS": "old",
                "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-01-01T00:00:00Z"}],
            },
            Progress.PAUSED,
            "Paused: CanaryPauseStep",
            id="paused-canary-step",
        ),
        pytest.param(
            {"phase": "Paused", "message": "manually paused", "stableRS": "old"},
            Progress.PAUSED,
            "Paused: manually paused",
            id="paused-by-a-person",
        ),
        pytest.param(
            {"phase": "Degraded", "message": "ProgressDeadlineExceeded: ReplicaSet web-new timed out"},
            Progress.FAILED,
            "Degraded: ProgressDeadlineExceeded",
            id="degraded",
        ),
        pytest.param(
            {"phase": "Degraded", "message": "RolloutAborted: metric error-rate failed", "abort": True},
            Progress.FAILED,
            "RolloutAborted",
            id="aborted-by-analysis",
        ),
        pytest.param({"phase": ""}, Progress.PROGRESSING, "waiting for the Argo Rollouts", id="no-phase"),
    ],
)
def test_rollout_health_of_each_phase(fields: dict[str, Any], progress: Progress, reason: str) -> None:
    health = Kind.ROLLOUT.profile.rollout_health(2, {"replicas": 2}, status(**fields))
    assert health.progress is progress and reason in health.reason


@pytest.mark.parametrize(
    ("kind", "strategy", "manages"),
    [
        (Kind.ROLLOUT, {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}}, True),
        (Kind.ROLLOUT, {"canary": {"analysis": {"templates": [{"templateName": "error-rate"}]}}}, True),
        (Kind.ROLLOUT, {"blueGreen": {"activeService": "web", "autoPromotionEnabled": False}}, True),
        (Kind.ROLLOUT, {"canary": {"maxSurge": "25%"}}, False),  # rolls like a Deployment
        (Kind.ROLLOUT, {"canary": {"steps": []}}, False),
        (Kind.DEPLOYMENT, {"type": "RollingUpdate"}, False),
    ],
)
def test_who_rolls_back(kind: Kind, strategy: dict[str, Any], manages: bool) -> None:
    workload = workload_from(kind, served(kind, {"strategy": strategy}, {}))
    assert workload.manages_own_rollback is manages


# -- rollback and verification -----------------------------------------------------------------------

IMAGE = "registry.example.com/team/web:stable"
PREVIOUS = f"registry.example.com/team/web:stable@{D0}"
PINNED = f"registry.example.com/team/web:stable@{D1}"
CANARY = {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}}


def argo(strategy: dict[str, Any], **fields: Any) -> Workload:
    obj = served(Kind.ROLLOUT, {"replicas": 2, "strategy": strategy}, status(**fields))
    obj["metadata"].update(namespace="shop", name="web", resourceVersion="7")
    obj["spec"]["template"]["spec"]["containers"] = [{"name": "app", "image": PINNED}]
    return workload_from(Kind.ROLLOUT, obj)


@pytest.mark.parametrize(
    ("strategy", "outcome"),
    [(CANARY, RestoreOutcome.LEFT_TO_ARGO), ({"canary": {}}, RestoreOutcome.RESTORED)],
)
def test_tagpin_patches_the_previous_image_back_only_where_argo_does_not(
    strategy: dict[str, Any], outcome: RestoreOutcome
) -> None:
    cluster = FakeCluster([argo(strategy)])
    target = Target(cluster="prod", namespace="shop", kind=Kind.ROLLOUT, name="web", container="app")
    assert restore(cluster, target, PREVIOUS, D1, 1) is outcome
    patched = outcome is RestoreOutcome.RESTORED
    assert cluster.image("shop", Kind.ROLLOUT, "web", "app") == (PREVIOUS if patched else PINNED)
    assert len(cluster.patches) == int(patched)


class World:
    """One Rollout target, patched to D1 (previous D0) at ``applied``, being verified."""

    TIMEOUT_S = 60

    def __init__(self, store: State, workload: Workload, **rollout: Any) -> None:
        self.store = store
        self.notifier = RecordingNotifier()
        self.cluster = FakeCluster([workload])
        self.clock = FakeClock(1_800_000_000_000)
        self.queue = ListVerificationQueue()
        self.target = Target(cluster="prod", namespace="shop", kind=Kind.ROLLOUT, name="web", container="app")
        followed = {IMAGE: FollowedImage(image=IMAGE, targets=[self.target])}
        settings = RolloutSettings(
            **{"verify_interval_seconds": 10, "verify_timeout_seconds": self.TIMEOUT_S, **rollout}
        )
        promoter = Promoter(
            state=store,
            followed=lambda: followed,
            settings=lambda: settings,
            verifications=self.queue,
            changes=ListQueue(),
            notifier=None,
            clock=self.clock,
        )
        self.verifier = Verifier(
            state=store,
            workloads=FakeClusters(prod=self.cluster),
            followed=lambda: followed,
            settings=lambda: settings,
            verifications=self.queue,
            promoter=promoter,
            notifier=self.notifier,
            clock=self.clock,
        )
        self.applied = self.clock()
        store.tags.record(IMAGE, D1, self.applied, Trigger.POLL)
        start_promotion(store, IMAGE, D1, self.applied)
        assert store.targets.claim(self.target.id, IMAGE, D1, self.applied, Trigger.POLL, self.applied)
        store.targets.finish(
            self.target.id,
            D1,
            TargetStatus.APPLIED,
            self.applied,
            trigger=Trigger.POLL,
            previous_image=PREVIOUS,
        )
        self.verification = Verification(
            kind=VerificationKind.VERIFY,
            move=Move(image=IMAGE, digest=D1, observed_at=self.applied, trigger=Trigger.POLL),
            target_id=self.target.id,
            applied_at=self.applied,
        )

    def phase(self, **fields: Any) -> None:
        self.cluster.items[("shop", Kind.ROLLOUT, "web")].rollout = Kind.ROLLOUT.profile.rollout_health(
            2, {}, status(**fields)
        )

    def verify(self, after_s: int, verification: Verification | None = None) -> Any:
        self.clock.now = self.applied + after_s * 1000
        self.queue.sent.clear()
        return self.verifier.verify(verification or self.verification)

    def target_status(self) -> TargetStatus:
        st = self.store.targets.get(self.target.id)
        assert st is not None
        return st.status


PAUSED = {
    "phase": "Paused",
    "stableRS": "old",
    "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-01-01T00:00:00Z"}],
}


def test_a_paused_canary_waits_past_the_timeout_and_the_timeout_counts_from_the_end_of_the_pause(store):
    world = World(store, argo(CANARY))
    world.phase(**PAUSED)
    result = world.verify(after_s=world.TIMEOUT_S * 10)  # paused for far longer than the timeout
    assert (result.outcome, result.detail) == (VerificationOutcome.PAUSED, "Paused: CanaryPauseStep")
    assert world.target_status() is TargetStatus.APPLIED  # not failed: waiting for Argo's steps
    ((again, delay),) = world.queue.sent
    assert delay == 10 and again.paused_at == world.clock.now and again.applied_at == world.applied

    world.phase(phase="Progressing", stableRS="old")  # promoted: the rest of its steps
    result = world.verify(after_s=world.TIMEOUT_S * 10 + 30, verification=again)
    assert result.outcome is VerificationOutcome.PROGRESSING  # 30 s after the pause, not 630 after the patch
    ((progressing, _),) = world.queue.sent
    world.phase()  # Healthy, the new template stable
    result = world.verify(after_s=world.TIMEOUT_S * 10 + 40, verification=progressing)
    assert result.outcome is VerificationOutcome.VERIFIED and world.target_status() is TargetStatus.VERIFIED
    detail = store.targets.get(world.target.id).detail  # type: ignore[union-attr]
    assert detail == "Healthy: ReplicaSet new is stable (640.0 s after the patch)"


def test_a_rollout_still_progressing_a_timeout_after_its_pause_fails(store):
    world = World(store, argo(CANARY))
    world.phase(**PAUSED)
    world.verify(after_s=5)
    ((again, _),) = world.queue.sent
    world.phase(phase="Progressing", stableRS="old")
    result = world.verify(after_s=5 + world.TIMEOUT_S + 1, verification=again)
    assert (
        result.outcome is VerificationOutcome.FAILED
    )  # a canary's way back is Argo's: failed, not rolled back
    assert f"not rolled out {world.TIMEOUT_S} s after its last pause: Progressing" in result.detail


def test_a_degraded_canary_fails_marks_the_digest_bad_and_is_left_to_argo(store):
    world = World(store, argo(CANARY))
    world.phase(
        phase="Degraded", message="RolloutAborted: metric error-rate failed", abort=True, stableRS="old"
    )
    result = world.verify(after_s=20)
    assert result.outcome is VerificationOutcome.FAILED and "Degraded: RolloutAborted" in result.detail
    assert world.target_status() is TargetStatus.FAILED  # recorded; never rolled_back by tagpin
    assert world.cluster.patches == []  # Argo's abort is left to act: no patch back
    assert world.cluster.image("shop", Kind.ROLLOUT, "web", "app") == PINNED
    tag = store.tags.get(IMAGE)
    assert tag is not None and tag.blocked and world.target.id in (tag.bad_reason or "")
    assert store.promotions.get(IMAGE).status is PromotionStatus.HALTED  # type: ignore[union-attr]
    # the verification delivered again changes nothing
    again = world.verify(after_s=25)
    assert world.target_status() is TargetStatus.FAILED and world.cluster.patches == [] and again.detail


def test_a_degraded_canary_without_steps_is_rolled_back_as_a_deployment_is(store):
    world = World(store, argo({"canary": {"maxSurge": 1}}))
    world.phase(phase="Degraded", message="ProgressDeadlineExceeded: timed out", stableRS="old")
    result = world.verify(after_s=20)
    assert result.outcome is VerificationOutcome.ROLLED_BACK
    assert world.target_status() is TargetStatus.ROLLED_BACK
    assert world.cluster.image("shop", Kind.ROLLOUT, "web", "app") == PREVIOUS
