"""Has a rollout finished? The workload's status read the way ``kubectl rollout status`` reads it.

- Deployment: the controller observed the new generation; ``Progressing`` is not
  ``ProgressDeadlineExceeded`` (that is a failure, at once); every replica is updated, no old
  replica is left and every updated replica is available. A Deployment a person paused
  (``kubectl rollout pause``: ``spec.paused``, ``Progressing`` ``DeploymentPaused``) rolls nothing
  out until it is resumed: ``PAUSED``, as an Argo Rollout at a pause step, never a failure of
  the image.
- StatefulSet (RollingUpdate): observed; every replica ready; the updated replicas cover the
  ones above the partition; with no partition, ``currentRevision`` caught up with ``updateRevision``.
  ``OnDelete`` rollouts happen when someone deletes pods: nothing to follow.
- DaemonSet (RollingUpdate): observed; every scheduled node updated and available.
- CronJob: the next run uses the new image; there is no rollout to follow.
- Rollout (Argo Rollouts), read as Argo CD reads it: observed (``status.observedGeneration``, a
  string); then its controller's ``status.phase``: ``Healthy`` with the new template stable
  (``stableRS == currentPodHash``) is complete, ``Progressing`` is looked at again, ``Degraded``
  (its progress deadline, a failed analysis, an abort) is a failure at once, and ``Paused`` (a
  pause step of its canary, a blue-green promotion waiting, a person's pause) is ``PAUSED``.

StatefulSets and DaemonSets have no progress deadline: a rollout that does not finish within
``rollout.verify_timeout_seconds`` fails (the caller's clock).

``PAUSED`` is neither progress nor failure: the rollout waits for a step's duration or for a person
to promote (or resume) it, which may take hours. The verifier waits up to ``rollout.max_pause_seconds``
(then the target is ``stalled``), and counts the timeout again from the end of the pause, as Argo
Rollouts counts its own progress deadline (``tagpin.usecases.verify``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tagpin.domain.config import Kind


class Progress(StrEnum):
    PROGRESSING = "progressing"
    PAUSED = "paused"  # held at a pause step by its own controller (Argo Rollouts): not a failure
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class Health:
    progress: Progress
    reason: str


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def evaluate(kind: Kind, generation: int, spec: dict[str, Any], status: dict[str, Any]) -> Health:
    """``spec`` and ``status`` as the API serves them (JSON)."""
    if kind is Kind.CRONJOB:
        return Health(Progress.COMPLETE, "CronJob: the next run uses the new image")
    observed = _int(status.get("observedGeneration"), -1)
    if observed < generation:
        return Health(Progress.PROGRESSING, f"waiting for the controller (generation {generation})")
    if kind is Kind.DEPLOYMENT:
        return _deployment(spec, status)
    if kind is Kind.STATEFULSET:
        return _statefulset(spec, status)
    if kind is Kind.ROLLOUT:
        return _rollout(status)
    return _daemonset(spec, status)


def _deployment(spec: dict[str, Any], status: dict[str, Any]) -> Health:
    conditions = status.get("conditions") or []
    for condition in conditions:
        if condition.get("type") == "Progressing" and condition.get("reason") == "ProgressDeadlineExceeded":
            return Health(
                Progress.FAILED, f"ProgressDeadlineExceeded: {condition.get('message', '')}".strip()
            )
    want = _int(spec.get("replicas"), 1)
    updated = _int(status.get("updatedReplicas"))
    total = _int(status.get("replicas"))
    available = _int(status.get("availableReplicas"))
    if updated < want:
        health = Health(Progress.PROGRESSING, f"{updated} of {want} replicas updated")
    elif total > updated:
        health = Health(Progress.PROGRESSING, f"{total - updated} old replicas pending termination")
    elif available < updated:
        health = Health(Progress.PROGRESSING, f"{available} of {updated} updated replicas available")
    else:
        return Health(Progress.COMPLETE, f"{updated} of {want} replicas updated and available")
    # A person paused it (`kubectl rollout pause`): the controller rolls nothing out until it is
    # resumed, and says so; not the new image's failure.
    paused = spec.get("paused") is True or any(
        c.get("type") == "Progressing" and c.get("reason") == "DeploymentPaused" for c in conditions
    )
    if paused:
        return Health(Progress.PAUSED, f"Paused: DeploymentPaused, rolls out once resumed ({health.reason})")
    return health


def _statefulset(spec: dict[str, Any], status: dict[str, Any]) -> Health:
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type") == "OnDelete":
        return Health(Progress.COMPLETE, "OnDelete update strategy: pods change when deleted")
    want = _int(spec.get("replicas"), 1)
    ready = _int(status.get("readyReplicas"))
    if ready < want:
        return Health(Progress.PROGRESSING, f"{ready} of {want} pods ready")
    partition = _int((strategy.get("rollingUpdate") or {}).get("partition"))
    updated = _int(status.get("updatedReplicas"))
    if partition > 0:
        if updated < want - partition:
            return Health(
                Progress.PROGRESSING, f"{updated} of {want - partition} pods above the partition updated"
            )
        return Health(Progress.COMPLETE, f"partitioned rollout: {updated} pods updated")
    if status.get("updateRevision") != status.get("currentRevision") or updated < want:
        return Health(Progress.PROGRESSING, f"{updated} of {want} pods updated")
    return Health(Progress.COMPLETE, f"{want} pods at revision {status.get('currentRevision')}")


def _daemonset(spec: dict[str, Any], status: dict[str, Any]) -> Health:
    if (spec.get("updateStrategy") or {}).get("type") == "OnDelete":
        return Health(Progress.COMPLETE, "OnDelete update strategy: pods change when deleted")
    want = _int(status.get("desiredNumberScheduled"))
    updated = _int(status.get("updatedNumberScheduled"))
    available = _int(status.get("numberAvailable"))
    if updated < want:
        return Health(Progress.PROGRESSING, f"{updated} of {want} nodes updated")
    if available < want:
        return Health(Progress.PROGRESSING, f"{available} of {want} pods available")
    return Health(Progress.COMPLETE, f"{want} nodes updated and available")


def _rollout(status: dict[str, Any]) -> Health:
    """An Argo Rollout whose controller observed the new generation."""
    phase, message = str(status.get("phase") or ""), str(status.get("message") or "")
    said = f"{phase}: {message}" if message else phase
    if phase == "Degraded" or status.get("abort"):
        return Health(Progress.FAILED, said if phase == "Degraded" else f"aborted: {message}".strip())
    if phase == "Paused":
        reasons = sorted(
            {str(p.get("reason")) for p in status.get("pauseConditions") or [] if p.get("reason")}
        )
        return Health(Progress.PAUSED, f"Paused: {', '.join(reasons) or message or 'paused'}")
    current, stable = status.get("currentPodHash"), status.get("stableRS")
    if phase == "Healthy":
        if current and stable and current != stable:  # not promoted yet: the stable one is the old
            return Health(Progress.PROGRESSING, f"Healthy, but the stable ReplicaSet is still {stable}")
        return Health(Progress.COMPLETE, f"Healthy: ReplicaSet {current or stable or '?'} is stable")
    if phase == "Progressing":
        return Health(Progress.PROGRESSING, said)
    return Health(
        Progress.PROGRESSING, f"waiting for the Argo Rollouts controller (phase {phase or 'unset'})"
    )
