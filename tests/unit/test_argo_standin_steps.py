"""The Argo Rollouts stand-in's decisions (tools/tagpin_local/kube/argo_steps.py) at the points a
poll of the real cluster can only see for a moment: what it decides there is what must last."""

from __future__ import annotations

from typing import Any

from tagpin_local.kube.argo_steps import HASH_LABEL, Progress, decide, template_hash
from tagpin_local.kube.manifests import rollout

IMAGE = "127.0.0.1:5000/demo/cart"
NOW = 1_800_000_000.0


def replica_set(obj: dict[str, Any], template: dict[str, Any], replicas: int) -> dict[str, Any]:
    hashed = template_hash(template)
    return {
        "metadata": {"name": f"cart-{hashed}", "labels": {HASH_LABEL: hashed}},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas},
    }


def paused_canary() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """4 replicas at ``setWeight: 25`` then a pause: the canary's pod available, 3 stable pods."""
    old = rollout("cart", "ns", f"{IMAGE}:1", replicas=4, steps=[{"setWeight": 25}, {"pause": {}}])
    new = rollout("cart", "ns", f"{IMAGE}:2", replicas=4, steps=[{"setWeight": 25}, {"pause": {}}])
    stable = replica_set(old, old["spec"]["template"], 3)
    canary = replica_set(new, new["spec"]["template"], 1)
    new["metadata"].update(generation=2, uid="u", annotations={"rollout.argoproj.io/revision": "2"})
    new["status"] = {
        "phase": "Paused",
        "currentPodHash": template_hash(new["spec"]["template"]),
        "stableRS": template_hash(old["spec"]["template"]),
        "currentStepIndex": 1,
        "controllerPause": True,
        "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2027-01-15T08:00:00Z"}],
    }
    return new, [stable, canary]


def test_a_paused_canary_keeps_its_weight():
    obj, sets = paused_canary()
    decision = decide(obj, sets, NOW, Progress())
    assert decision.scale == {}  # neither the canary (1) nor the stable ReplicaSet (3) moves
    assert decision.status["phase"] == "Paused" and decision.status["currentStepIndex"] == 1
    assert decision.status["pauseConditions"] == obj["status"]["pauseConditions"]


def test_a_promoted_canary_scales_up_whole():
    obj, sets = paused_canary()
    obj["status"]["pauseConditions"] = None  # what `kubectl argo rollouts promote` writes
    decision = decide(obj, sets, NOW, Progress())
    canary = sets[1]["metadata"]["name"]
    assert decision.scale == {canary: 4}  # the stable ReplicaSet (3) gives pods up as the canary gains them
    assert decision.status["phase"] == "Progressing" and decision.status["currentStepIndex"] == 2
