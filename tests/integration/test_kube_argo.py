"""Argo Rollouts in the local clusters (tools/tagpin_local/kube/argo.py): its published CRD served by
the real API server, and the stand-in for its controller moving ``status.phase`` through the cases
tagpin handles, read back as tagpin reads it (tagpin.usecases.health) and as kubectl shows it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiException
from tagpin.domain.config import Kind
from tagpin.usecases.health import Progress, evaluate
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.manifests import rollout

from tests.support.kube import cluster, wait_for

pytestmark = pytest.mark.integration

IMAGE = "127.0.0.1:5000/demo/cart"  # never pulled: kwok runs no containers
_SERIAL = itertools.count()


@pytest.fixture(scope="module")
def kube() -> Iterator[LocalCluster]:
    for lent in cluster():
        local = LocalCluster(lent, "argo")
        yield local
        local.close()


@pytest.fixture
def ns(kube: LocalCluster) -> Iterator[str]:
    name = f"argo-{next(_SERIAL)}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kube.delete("Namespace", None, name)


def status(kube: LocalCluster, ns: str) -> dict[str, Any]:
    return dict(kube.get("Rollout", ns, "cart").get("status") or {})


def health(kube: LocalCluster, ns: str) -> Progress:
    obj = kube.get("Rollout", ns, "cart")
    return evaluate(
        Kind.ROLLOUT, obj["metadata"]["generation"], obj["spec"], obj.get("status") or {}
    ).progress


def phase(kube: LocalCluster, ns: str, wanted: str, generation: int) -> dict[str, Any]:
    """Wait until the controller observed ``generation`` and reports ``wanted``."""

    def reached() -> dict[str, Any] | None:
        found = status(kube, ns)
        return (
            found
            if (found.get("phase"), found.get("observedGeneration")) == (wanted, str(generation))
            else None
        )

    return wait_for(f"phase {wanted} at generation {generation}", reached)


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
    set_image(kube, ns, "2")
    phase(kube, ns, "Paused", 2)
    assert phase(kube, ns, "Healthy", 2)["currentStepIndex"] == 2


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
