"""Argo Rollouts' ``Degraded`` read for the rollout tagpin began: a failure the controller recorded
before the patch belongs to an earlier rollout (``Health.after``), dated by the condition Argo's
phase rests on (``CalculateRolloutPhase``: ``InvalidSpec``, ``RolloutAborted``,
``ProgressDeadlineExceeded``) or by ``status.abortedAt``; and the local stand-in dates its
conditions as Argo's ``SetRolloutCondition`` does, so that the profile reads its failures' times."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin.domain.config import Kind
from tagpin.domain.kinds import Progress
from tagpin_local.kube.argo_steps import HASH_LABEL, decide, template_hash, timestamp
from tagpin_local.kube.argo_steps import Progress as Since
from tagpin_local.kube.manifests import rollout

AT = 1_800_000_000  # when the controller recorded the failure (epoch s)
AT_MS = AT * 1000
IMAGE = "127.0.0.1:5000/demo/cart"


def degraded(**status: Any) -> dict[str, Any]:
    return {"observedGeneration": "2", "phase": "Degraded", **status}


def condition(reason: str, kind: str = "Progressing", at: int | None = AT) -> dict[str, Any]:
    dated = {"lastUpdateTime": timestamp(at), "lastTransitionTime": timestamp(at)} if at else {}
    return {"type": kind, "status": "False", "reason": reason, "message": "m", **dated}


DEADLINE = degraded(
    message="ProgressDeadlineExceeded: ReplicaSet cart-x has timed out progressing.",
    conditions=[condition("ProgressDeadlineExceeded"), condition("AvailableReason", "Available", AT - 60)],
)
ABORTED = degraded(message="RolloutAborted: Rollout aborted update to revision 2", abort=True,
                   conditions=[condition("RolloutAborted")])  # fmt: skip
INVALID = degraded(message="InvalidSpec: m", conditions=[condition("InvalidSpec", "InvalidSpec")])
ABORT_ONLY = {"observedGeneration": "2", "phase": "Progressing", "abort": True, "abortedAt": timestamp(AT)}


@pytest.mark.parametrize(
    "status", [DEADLINE, ABORTED, INVALID, ABORT_ONLY], ids=["deadline", "aborted", "invalid", "abort"]
)
@pytest.mark.parametrize(
    ("began_ms", "progress"),
    [
        (AT_MS + 700, Progress.PROGRESSING),  # recorded before the patch (whole seconds): an earlier one
        (AT_MS + 3_600_000, Progress.PROGRESSING),
        (AT_MS, Progress.FAILED),  # recorded at or after the patch: this rollout's
        (AT_MS - 600_000, Progress.FAILED),
        (None, Progress.FAILED),  # asked without the rollout's start (tagpin doctor, the console)
    ],
)
def test_a_degraded_rollout_recorded_before_the_rollout_began_is_an_earlier_rollouts(
    status: dict[str, Any], began_ms: int | None, progress: Progress
) -> None:
    health = Kind.ROLLOUT.profile.rollout_health(2, {}, status)
    assert health.progress is Progress.FAILED and health.recorded_at == AT_MS
    read = health if began_ms is None else health.after(began_ms)
    assert read.progress is progress
    if progress is Progress.PROGRESSING:
        assert read.reason.startswith("an earlier rollout's failure") and health.reason in read.reason


def test_a_degraded_rollout_without_a_time_is_a_failure_whenever_the_rollout_began() -> None:
    undated = degraded(
        message="ProgressDeadlineExceeded", conditions=[condition("ProgressDeadlineExceeded", at=None)]
    )
    for status in (undated, degraded(message="RolloutAborted: m", abort=True), degraded()):
        health = Kind.ROLLOUT.profile.rollout_health(2, {}, status)
        assert health.recorded_at is None
        assert health.after(10**13).progress is Progress.FAILED


def replica_set(template: dict[str, Any], replicas: int, available: int) -> dict[str, Any]:
    hashed = template_hash(template)
    return {
        "metadata": {"name": f"cart-{hashed}", "labels": {HASH_LABEL: hashed}},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": available, "availableReplicas": available},
    }


def test_the_stand_in_keeps_a_degraded_conditions_time_and_the_profile_dates_the_failure_by_it() -> None:
    """A canary that never becomes available is Degraded at its deadline; later syncs (its stable
    pods' count changes) keep the condition's ``lastUpdateTime`` as Argo's ``SetRolloutCondition``
    does, so a rollout begun after the deadline reads it as an earlier one's."""
    old = rollout("cart", "ns", f"{IMAGE}:1", replicas=2, steps=[{"setWeight": 50}], progress_deadline=3)
    new = rollout("cart", "ns", f"{IMAGE}:2", replicas=2, steps=[{"setWeight": 50}], progress_deadline=3)
    new["metadata"].update(generation=2, uid="u", annotations={"rollout.argoproj.io/revision": "2"})
    stable_hash = template_hash(old["spec"]["template"])
    new["status"] = {"stableRS": stable_hash, "currentPodHash": stable_hash, "phase": "Healthy"}
    sets = [replica_set(old["spec"]["template"], 1, 1), replica_set(new["spec"]["template"], 1, 0)]
    since = Since()
    for now in (AT - 3, AT - 1):  # progress is last made at AT - 3
        new["status"] = decide(new, sets, now, since).status
        assert new["status"]["phase"] == "Progressing"
    new["status"] = decide(new, sets, AT, since).status
    assert new["status"]["phase"] == "Degraded"
    sets[0]["status"]["availableReplicas"] = 0  # a stable pod lost: the controller writes again
    later = decide(new, sets, AT + 30, since).status
    assert later["phase"] == "Degraded" and later["availableReplicas"] == 0
    (progressing,) = [c for c in later["conditions"] if c["type"] == "Progressing"]
    assert progressing["reason"] == "ProgressDeadlineExceeded"
    assert progressing["lastUpdateTime"] == timestamp(AT)  # not AT + 30
    health = Kind.ROLLOUT.profile.rollout_health(2, new["spec"], later)
    assert health.progress is Progress.FAILED and health.recorded_at == AT_MS
    assert health.after(AT_MS - 5_000).progress is Progress.FAILED  # began before it: its own
    assert health.after(AT_MS + 20_000).progress is Progress.PROGRESSING  # began after it: earlier
