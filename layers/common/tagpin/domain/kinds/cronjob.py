"""CronJob (``batch/v1``): the pod template sits in its job template; the next run uses the new
image, so there is no rollout to follow, and between runs no pods say what it runs (an unpinned
CronJob's digest is unknown to the reconciler)."""

from __future__ import annotations

from tagpin.domain.kinds.profile import Health, Json, Profile, Progress


def health(spec: Json, status: Json) -> Health:
    return Health(Progress.COMPLETE, "CronJob: the next run uses the new image")


PROFILE = Profile(
    kind="CronJob",
    order=40,
    group="batch",
    version="v1",
    plural="cronjobs",
    template=("spec", "jobTemplate", "spec", "template"),
    health=health,
    selector=None,
    observes=False,
)
