"""Argo Rollouts' Rollout (``argoproj.io/v1alpha1``, a custom resource; docs/clusters.md).

Its health is read as Argo CD reads it: observed (``status.observedGeneration``, a string); then its
controller's ``status.phase``: ``Healthy`` with the new template stable (``stableRS ==
currentPodHash``) is complete, ``Progressing`` is looked at again, ``Degraded`` (its progress
deadline, a failed analysis, an abort) is a failure, and ``Paused`` (a pause step of its canary, a
blue-green promotion waiting, a person's pause) is ``PAUSED``.

A failure carries when the controller recorded it, as a Deployment's does (``Health.after``: one
recorded before the rollout began belongs to an earlier one). Argo computes ``Degraded`` from its
conditions (``CalculateRolloutPhase``, utils/rollout/rolloututil.go): an ``InvalidSpec`` condition,
or one whose reason is ``RolloutAborted`` or ``ProgressDeadlineExceeded``; each condition has a
``lastUpdateTime``, which ``SetRolloutCondition`` (utils/conditions/conditions.go) leaves as it was
while the condition's status and reason stay the same. Like the deployment controller, Argo keeps a
``ProgressDeadlineExceeded`` condition until it sees progress (``RolloutTimedOut`` answers true
while it stands), so a return to an image whose ReplicaSet exists can be observed while the old
deadline still makes the phase ``Degraded``. An abort without that condition is dated by
``status.abortedAt``.

A custom resource takes no strategic merge patch: the change goes as a JSON patch
(``tagpin.adapters.kubernetes.jsonpatch``). With canary steps or analysis, or blue-green, its own
controller undoes a failed rollout (it aborts and keeps its stable ReplicaSet): tagpin then records
the failure and never patches the previous image over it. A canary without steps or analysis rolls
like a Deployment, and is rolled back like one.
"""

from __future__ import annotations

from collections.abc import Mapping

from tagpin.domain.kinds.profile import Health, Json, PatchType, Profile, Progress, epoch_ms

DEGRADING = frozenset({"RolloutAborted", "ProgressDeadlineExceeded"})  # conditions.go's reasons


def failed_at(status: Json) -> int | None:
    """When the controller recorded the failure it reports (epoch ms): the ``lastUpdateTime`` of
    the condition Argo's phase rests on, else ``abortedAt``; None where neither says."""
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and (
            condition.get("type") == "InvalidSpec" or condition.get("reason") in DEGRADING
        ):
            return epoch_ms(condition.get("lastUpdateTime"))
    return epoch_ms(status.get("abortedAt"))


def health(spec: Json, status: Json) -> Health:
    phase, message = str(status.get("phase") or ""), str(status.get("message") or "")
    said = f"{phase}: {message}" if message else phase
    if phase == "Degraded" or status.get("abort"):
        reason = said if phase == "Degraded" else f"aborted: {message}".strip()
        return Health(Progress.FAILED, reason, recorded_at=failed_at(status))
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


def own_rollback(spec: Json) -> bool:
    strategy = spec.get("strategy") or {}
    canary = strategy.get("canary") or {}
    return "blueGreen" in strategy or bool(canary.get("steps") or canary.get("analysis"))


PROFILE = Profile(
    kind="Rollout",
    order=50,
    group="argoproj.io",
    version="v1alpha1",
    plural="rollouts",
    template=("spec", "template"),
    health=health,
    patch=PatchType.JSON,
    custom=True,
    own_rollback=own_rollback,
)
