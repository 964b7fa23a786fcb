"""StatefulSet (``apps/v1``).

A RollingUpdate is complete when the controller observed it; every replica is ready; the updated
replicas cover the ones above the partition; with no partition, ``currentRevision`` caught up with
``updateRevision``. ``OnDelete`` rollouts happen when someone deletes pods: nothing to follow. A
StatefulSet has no progress deadline: a rollout that does not finish within
``rollout.verify_timeout_seconds`` fails (the verifier's clock).
"""

from __future__ import annotations

from tagpin.domain.kinds.profile import Health, Json, Profile, Progress, as_int


def health(spec: Json, status: Json) -> Health:
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type") == "OnDelete":
        return Health(Progress.COMPLETE, "OnDelete update strategy: pods change when deleted")
    want = as_int(spec.get("replicas"), 1)
    ready = as_int(status.get("readyReplicas"))
    if ready < want:
        return Health(Progress.PROGRESSING, f"{ready} of {want} pods ready")
    partition = as_int((strategy.get("rollingUpdate") or {}).get("partition"))
    updated = as_int(status.get("updatedReplicas"))
    if partition > 0:
        if updated < want - partition:
            return Health(
                Progress.PROGRESSING, f"{updated} of {want - partition} pods above the partition updated"
            )
        return Health(Progress.COMPLETE, f"partitioned rollout: {updated} pods updated")
    if status.get("updateRevision") != status.get("currentRevision") or updated < want:
        return Health(Progress.PROGRESSING, f"{updated} of {want} pods updated")
    return Health(Progress.COMPLETE, f"{want} pods at revision {status.get('currentRevision')}")


PROFILE = Profile(
    kind="StatefulSet",
    order=20,
    group="apps",
    version="v1",
    plural="statefulsets",
    template=("spec", "template"),
    health=health,
)
