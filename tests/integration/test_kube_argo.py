"""Argo Rollouts in the local clusters (tools/tagpin_local/kube/argo.py): its published CRD served by
the real API server, and the stand-in for its controller moving ``status.phase`` through the cases
tagpin handles, read back as tagpin reads it (its profile, tagpin.domain.kinds.rollout) and as kubectl
shows it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import ApiException
from tagpin.adapters.kubernetes.workloads import workload_from
from tagpin.domain.config import Kind
from tagpin.ports.workloads import Progress
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.manifests import rollout

from tests.support.kube import local_cluster, wait_for, watch_until

pytestmark = pytest.mark.integration

IMAGE = "127.0.0.1:5000/demo/cart"  # never pulled: kwok runs no containers
_SERIAL = itertools.count()


@pytest.fixture(scope="module")
def kube() -> Iterator[LocalCluster]:
    yield from local_cluster("argo")


@pytest.fixture
def ns(kube: LocalCluster) -> Iterator[str]:
    name = f"argo-{next(_SERIAL)}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kube.delete("Namespace", None, name)


def health(kube: LocalCluster, ns: str) -> Progress:
    obj = kube.get("Rollout", ns, "cart")
    return workload_from(Kind.ROLLOUT, obj).health.progress


def at(obj: dict[str, Any], wanted: str, generation: int) -> bool:
    """The controller observed ``generation`` and reports ``wanted``."""
    found = obj.get("status") or {}
    return (found.get("phase"), found.get("observedGeneration")) == (wanted, str(generation))


def phase(kube: LocalCluster, ns: str, wanted: str, generation: int) -> dict[str, Any]:
    """Wait until the controller observed ``generation`` and reports ``wanted`` (a state that
    lasts: one that may not is watched for, with :func:`watch_until`)."""

    def reached() -> dict[str, Any] | None:
        found = kube.get("Rollout", ns, "cart")
        return dict(found["status"]) if at(found, wanted, generation) else None

    return wait_for(f"phase {wanted} at generation {generation}", reached)


def seconds(timestamp: str) -> float:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def set_image(kube: LocalCluster, ns: str, tag: str) -> None:
    """As tagpin does it: a JSON patch (a custom resource takes no strategic merge patch)."""
    op = {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": f"{IMAGE}:{tag}"}
    kube.patch("Rollout", ns, "cart", [op], content_type="application/json-patch+json")


def running_images(kube: LocalCluster, ns: str) -> list[str]:
    return sorted(
        p["spec"]["containers"][0]["image"]
        for p in kube.pods_for("Rollout", ns, "cart")
        if p["status"].get("phase") == "Running"
    )


def test_the_published_crd_is_served_with_its_schema(kube, ns):
    with pytest.raises(ApiException) as refused:  # validated against Argo's own schema
        kube.create({**rollout("bad", ns, f"{IMAGE}:1"), "spec": {"replicas": "two"}})
    assert refused.value.status == 422
    with pytest.raises(ApiException) as strategic:  # no patch strategies on a custom resource
        kube.create(rollout("cart", ns, f"{IMAGE}:1"))
        kube.patch(
            "Rollout",
            ns,
            "cart",
            {"metadata": {"labels": {"a": "b"}}},
            "application/strategic-merge-patch+json",
        )
    assert strategic.value.status == 415
    shown = kube.kube.kubectl("get", "rollouts.argoproj.io", "-n", ns, "-o", "wide").stdout
    assert "DESIRED" in shown and "cart" in shown  # the CRD's printer columns


def test_a_canary_pauses_at_its_step_until_promoted_then_becomes_stable(kube, ns):
    kube.create(rollout("cart", ns, f"{IMAGE}:1", replicas=4, steps=[{"setWeight": 25}, {"pause": {}}]))
    first = phase(kube, ns, "Healthy", 1)  # the first template skips the steps
    assert first["stableRS"] == first["currentPodHash"] and health(kube, ns) is Progress.COMPLETE
    assert kube.get("Rollout", ns, "cart")["metadata"]["annotations"]["rollout.argoproj.io/revision"] == "1"

    set_image(kube, ns, "2")
    paused = phase(kube, ns, "Paused", 2)
    assert [c["reason"] for c in paused["pauseConditions"]] == ["CanaryPauseStep"] and paused[
        "controllerPause"
    ]
    assert paused["currentStepIndex"] == 1 and paused["stableRS"] != paused["currentPodHash"]
    assert health(kube, ns) is Progress.PAUSED
    wait_for("a quarter of the pods on the canary", lambda: running_images(kube, ns) == [
        f"{IMAGE}:1", f"{IMAGE}:1", f"{IMAGE}:1", f"{IMAGE}:2"
    ])  # fmt: skip
    held = {rs["metadata"]["name"]: rs["spec"]["replicas"] for rs in kube.list("ReplicaSet", ns)}
    assert held == {f"cart-{paused['stableRS']}": 3, f"cart-{paused['currentPodHash']}": 1}  # while paused

    kube.promote_rollout(ns, "cart")  # what `kubectl argo rollouts promote` writes
    done = phase(kube, ns, "Healthy", 2)
    assert done["stableRS"] == done["currentPodHash"] and done["currentStepIndex"] == 2
    assert "pauseConditions" not in done and health(kube, ns) is Progress.COMPLETE
    assert running_images(kube, ns) == [f"{IMAGE}:2"] * 4  # the old ReplicaSet scaled to 0
    assert kube.get("Rollout", ns, "cart")["metadata"]["annotations"]["rollout.argoproj.io/revision"] == "2"


def test_a_pause_with_a_duration_moves_on_by_itself(kube, ns):
    steps = [{"setWeight": 50}, {"pause": {"duration": "2s"}}]
    kube.create(rollout("cart", ns, f"{IMAGE}:1", steps=steps))
    phase(kube, ns, "Healthy", 1)
    since = kube.get("Rollout", ns, "cart")["metadata"]["resourceVersion"]
    set_image(kube, ns, "2")
    # The pause lasts 2 s, which a poll on a busy machine can miss: every status the controller
    # writes from the new template on, through a watch.
    written = [
        state.get("status") or {}
        for state in watch_until(
            kube, "Rollout", ns, "cart", since, "Healthy at generation 2", lambda s: at(s, "Healthy", 2)
        )
    ]
    paused = [s for s in written if (s.get("phase"), s.get("observedGeneration")) == ("Paused", "2")]
    assert paused, f"never Paused: {[s.get('phase') for s in written]}"
    (pause,) = paused[0]["pauseConditions"]  # what Argo records: why, and since when
    assert pause["reason"] == "CanaryPauseStep" and paused[0]["currentStepIndex"] == 1
    done = written[-1]
    assert done["currentStepIndex"] == 2 and "pauseConditions" not in done
    assert health(kube, ns) is Progress.COMPLETE
    healthy = next(c for c in done["conditions"] if c["type"] == "Healthy")
    # moved on by itself, not before the pause's duration (both times are the controller's clock)
    assert seconds(healthy["lastTransitionTime"]) - seconds(pause["startTime"]) >= 2


def test_a_canary_that_never_becomes_available_is_degraded_at_its_deadline(kube, ns):
    kube.break_image(f"{IMAGE}:broken")
    try:
        kube.create(rollout("cart", ns, f"{IMAGE}:1", steps=[{"setWeight": 50}], progress_deadline=3))
        phase(kube, ns, "Healthy", 1)
        set_image(kube, ns, "broken")
        degraded = phase(kube, ns, "Degraded", 2)
    finally:
        kube.repair_image(f"{IMAGE}:broken")
    assert degraded["message"].startswith("ProgressDeadlineExceeded: ReplicaSet")
    progressing = next(c for c in degraded["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert health(kube, ns) is Progress.FAILED
    assert running_images(kube, ns) == [f"{IMAGE}:1", f"{IMAGE}:1"]  # the stable pods keep serving
    set_image(kube, ns, "3")  # a new template starts over
    phase(kube, ns, "Healthy", 3)


def test_an_aborted_canary_goes_back_to_its_stable_pods(kube, ns):
    kube.create(rollout("cart", ns, f"{IMAGE}:1", steps=[{"setWeight": 50}, {"pause": {}}]))
    phase(kube, ns, "Healthy", 1)
    set_image(kube, ns, "2")
    phase(kube, ns, "Paused", 2)
    kube.abort_rollout(ns, "cart")  # what `kubectl argo rollouts abort` writes
    aborted = phase(kube, ns, "Degraded", 2)
    assert aborted["abort"] is True and aborted["message"].startswith("RolloutAborted")
    assert health(kube, ns) is Progress.FAILED
    wait_for("only the stable pods", lambda: running_images(kube, ns) == [f"{IMAGE}:1", f"{IMAGE}:1"])
