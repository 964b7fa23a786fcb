"""What tagpin knows about one workload kind, in one value: a ``Profile`` (Keel's ``GenericResource``
style). Each kind is one module of this package holding its ``PROFILE``: where the API serves it
(group, version, plural), where its pod template sits, how the change of one container's image is
sent, which pods it runs, and how its rollout's health is read from its status. Nothing else in
tagpin branches on a kind; adding one is a module here plus its lines in docs/rbac.yaml.

The functions of a profile read objects as the API serves them (JSON); they are pure, so the
domain holds them and every function (the consumer, the verifier, the reconciler, ``tagpin doctor``)
reads the same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

type Json = Mapping[str, Any]


class Progress(StrEnum):
    PROGRESSING = "progressing"
    PAUSED = "paused"  # held at a pause step or by a person: neither progress nor failure
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class Health:
    """Has the rollout finished? Read the way ``kubectl rollout status`` (or Argo CD) reads it."""

    progress: Progress
    reason: str
    # When the controller recorded what this health rests on (epoch ms, the cluster's clock, whole
    # seconds as the API serves them), where the status says: ``after`` trusts a failure only if
    # it was recorded after the rollout it is asked about began.
    recorded_at: int | None = None

    def after(self, began: int) -> Health:
        """This health, read for the rollout begun at ``began`` (epoch ms).

        A failure the controller recorded before ``began`` belongs to an earlier rollout: the real
        deployment controller records a new generation as observed without replacing its old
        ``ProgressDeadlineExceeded`` condition when the new template's ReplicaSet already exists
        (a return to an earlier image), until its next sync sees progress. Read as a failure, it
        would mark a good digest bad; it is read as progressing, so the verifier looks again (and
        its own timeout still ends a rollout that never progresses). A failure recorded at or
        after ``began`` is one: a genuine deadline comes ``progressDeadlineSeconds`` (at least a
        second) after the patch, so whole seconds and a skew under that do not hide it."""
        if self.progress is Progress.FAILED and self.recorded_at is not None and self.recorded_at < began:
            return Health(
                Progress.PROGRESSING,
                f"an earlier rollout's failure, recorded before this one began ({self.reason}): "
                "waiting for the controller's next sync",
            )
        return self


class PatchType(StrEnum):
    """How the API server takes a change of one container's image on this kind."""

    # built-in kinds: containers merge by name, the others stay untouched
    STRATEGIC_MERGE = "application/strategic-merge-patch+json"
    # custom resources have no patch strategies: the change is addressed field by field
    # (tagpin.adapters.kubernetes.jsonpatch says why not a JSON merge patch)
    JSON = "application/json-patch+json"


@dataclass(frozen=True)
class ImageChange:
    """The one change tagpin makes to a workload: one container's image and tagpin's pod-template
    annotations, made only if the workload still is at ``resource_version`` (else 409)."""

    resource_version: str
    container: str
    init: bool  # an init container
    image: str
    annotations: Mapping[str, str] = field(default_factory=dict)


def as_int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def epoch_ms(text: Any) -> int | None:
    """A time the API serves (RFC 3339, whole seconds) as epoch milliseconds; None where it is
    missing or not a time."""
    try:
        return int(datetime.fromisoformat(str(text)).timestamp() * 1000) if text else None
    except ValueError:
        return None


def dig(data: Json, path: tuple[str, ...]) -> Json:
    """The mapping at ``path`` in ``data``; empty where any step is missing or not a mapping."""
    here: Any = data
    for step in path:
        here = here.get(step) if isinstance(here, Mapping) else None
    return here if isinstance(here, Mapping) else {}


def spec_selector(data: Json) -> dict[str, Any] | None:
    """``spec.selector`` (a LabelSelector): the pods of most kinds."""
    selector = dig(data, ("spec", "selector"))
    return dict(selector) if selector else None


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector (``matchLabels`` and ``matchExpressions``) against a pod's labels. An empty
    or missing selector matches nothing here: the pods of a workload are never guessed."""
    if not selector:
        return False
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not match_labels and not expressions:
        return False
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for expression in expressions:
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def never(spec: Json) -> bool:
    return False


@dataclass(frozen=True)
class Profile:
    """One workload kind. ``health(generation, spec, status)`` is asked only once the controller
    observed ``generation`` unless ``observes`` is off (the kind has no rollout to follow)."""

    kind: str  # as the API and the configuration spell it: "Deployment"
    order: int  # where it comes in lists (the configuration reference, the reconciler's LISTs)
    group: str
    version: str
    plural: str
    template: tuple[str, ...]  # the pod template's path in the object
    health: Callable[[Json, Json], Health]  # (spec, status) once observed
    patch: PatchType = PatchType.STRATEGIC_MERGE
    custom: bool = False  # a custom resource: served only where its CRD is installed
    # the LabelSelector of its pods, from the object; None: no pods say what it runs
    selector: Callable[[Json], dict[str, Any] | None] | None = spec_selector
    observes: bool = True  # health waits for status.observedGeneration to reach the generation
    own_rollback: Callable[[Json], bool] = never  # its controller undoes a failed rollout itself

    @property
    def resource(self) -> str:
        """``deployments.apps``: as RBAC and ``kubectl`` name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def rollout_health(self, generation: int, spec: Json, status: Json) -> Health:
        """The health of the rollout of ``generation``: waiting for the controller first."""
        if self.observes and as_int(status.get("observedGeneration"), -1) < generation:
            return Health(Progress.PROGRESSING, f"waiting for the controller (generation {generation})")
        return self.health(spec, status)

    def patch_body(self, change: ImageChange) -> dict[str, Any]:
        """The change as a strategic-merge-style body: the container merged by name in the pod
        template, the annotations merged, ``metadata.resourceVersion`` as a precondition. Sent as
        it is for ``STRATEGIC_MERGE``; turned into a JSON patch against the object for ``JSON``."""
        field_name = "initContainers" if change.init else "containers"
        body: dict[str, Any] = {
            "metadata": {"annotations": dict(change.annotations)},
            "spec": {field_name: [{"name": change.container, "image": change.image}]},
        }
        for step in reversed(self.template):
            body = {step: body}
        body["metadata"] = {"resourceVersion": change.resource_version}
        return body
