"""DaemonSet (``apps/v1``).

A RollingUpdate is complete when the controller observed it and every scheduled node is updated
and available; ``OnDelete`` rollouts happen when someone deletes pods: nothing to follow. No
progress deadline: ``rollout.verify_timeout_seconds`` bounds it (the verifier's clock).
"""

from __future__ import annotations

from tagpin.domain.kinds.profile import Health, Json, Profile, Progress, as_int


def health(spec: Json, status: Json) -> Health:
    if (spec.get("updateStrategy") or {}).get("type") == "OnDelete":
        return Health(Progress.COMPLETE, "OnDelete update strategy: pods change when deleted")
    want = as_int(status.get("desiredNumberScheduled"))
    updated = as_int(status.get("updatedNumberScheduled"))
    available = as_int(status.get("numberAvailable"))
    if updated < want:
        return Health(Progress.PROGRESSING, f"{updated} of {want} nodes updated")
    if available < want:
        return Health(Progress.PROGRESSING, f"{available} of {want} pods available")
    return Health(Progress.COMPLETE, f"{want} nodes updated and available")


PROFILE = Profile(
    kind="DaemonSet",
    order=30,
    group="apps",
    version="v1",
    plural="daemonsets",
    template=("spec", "template"),
    health=health,
)
