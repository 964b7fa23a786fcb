"""Deployment (``apps/v1``).

Its rollout is complete when the controller observed the new generation; ``Progressing`` is not
``ProgressDeadlineExceeded`` (that is a failure, at once, if the controller recorded it after the
rollout began: ``Profile.rollout_health``); every replica is updated, no old replica
is left and every updated replica is available. A Deployment a person paused (``kubectl rollout
pause``: ``spec.paused``, ``Progressing`` ``DeploymentPaused``) rolls nothing out until it is
resumed: ``PAUSED``, never a failure of the image.
"""

from __future__ import annotations

from tagpin.domain.kinds.profile import Health, Json, Profile, Progress, as_int, epoch_ms


def recorded_at(condition: Json) -> int | None:
    """When the controller last updated ``condition`` (epoch ms); None where it does not say."""
    return epoch_ms(condition.get("lastUpdateTime"))


def health(spec: Json, status: Json) -> Health:
    conditions = status.get("conditions") or []
    for condition in conditions:
        if condition.get("type") == "Progressing" and condition.get("reason") == "ProgressDeadlineExceeded":
            return Health(
                Progress.FAILED,
                f"ProgressDeadlineExceeded: {condition.get('message', '')}".strip(),
                recorded_at=recorded_at(condition),
            )
    want = as_int(spec.get("replicas"), 1)
    updated = as_int(status.get("updatedReplicas"))
    total = as_int(status.get("replicas"))
    available = as_int(status.get("availableReplicas"))
    if updated < want:
        found = Health(Progress.PROGRESSING, f"{updated} of {want} replicas updated")
    elif total > updated:
        found = Health(Progress.PROGRESSING, f"{total - updated} old replicas pending termination")
    elif available < updated:
        found = Health(Progress.PROGRESSING, f"{available} of {updated} updated replicas available")
    else:
        return Health(Progress.COMPLETE, f"{updated} of {want} replicas updated and available")
    # A person paused it: the controller rolls nothing out until it is resumed, and says so.
    paused = spec.get("paused") is True or any(
        c.get("type") == "Progressing" and c.get("reason") == "DeploymentPaused" for c in conditions
    )
    if paused:
        return Health(Progress.PAUSED, f"Paused: DeploymentPaused, rolls out once resumed ({found.reason})")
    return found


PROFILE = Profile(
    kind="Deployment",
    order=10,
    group="apps",
    version="v1",
    plural="deployments",
    template=("spec", "template"),
    health=health,
)
