"""Apply a change: move every target of a tag to ``repo:tag@<digest>``, once per (target, digest).

The Kubernetes side is a port (``Workloads``); ``tagpin.clusters`` adapts the official client to
it, tests may use the API simulator. Each target is applied through an idempotency guard
(powertools on DynamoDB in the consumer) keyed on target and digest, so a duplicated or replayed
message never rolls a workload twice; the state's conditional claim makes sure an older digest
never replaces a newer one.

With a checks queue, every patch is followed by a delayed ``verify`` check (``tagpin.verify``):
the target is ``applied`` until the workload has rolled out (``verified``) or failed (then it is
rolled back and the digest marked bad for the tag). The waves of ``rollout.waves`` gate which
targets a change may touch: only those of the promotion's active wave and the waves before it
(``tagpin.promote`` advances the promotion). Maintenance windows and the per-cluster concurrency
limit defer a target (a delayed ``retry`` check re-sends the change); ``rollout.dry_run`` records
the plan and patches nothing; a digest marked bad is never applied, whichever path brings it.

Failures split in two. Transient ones (cluster unreachable, 5xx, a conflict that outlasts the
retries) are raised, so the SQS record fails, is retried and ends in the dead-letter queue.
Permanent ones (the workload is gone, RBAC forbids the patch, the container does not exist) are
recorded on the target and reported without failing the message; neither kind is stored by the
idempotency guard, and the poller re-enqueues a target that is behind, so a fixed permission or a
workload created later heals by itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from tagpin.checks import Check, CheckQueue
from tagpin.config import FollowedImage, Kind, RolloutSettings, Target
from tagpin.models import Change, TargetChange
from tagpin.refs import ImageRef, InvalidReference, familiar
from tagpin.state import PromotionStatus, StateStore, TargetState, TargetStatus
from tagpin.waves import PlannedWave, plan, window_gate

if TYPE_CHECKING:
    from tagpin.notify import Notifier
    from tagpin.promote import Promoter

logger = logging.getLogger(__name__)

ANNOTATION_DIGESTS = "tagpin.dev/digests"
ANNOTATION_APPLIED_AT = "tagpin.dev/applied-at"
ANNOTATION_TRIGGER = "tagpin.dev/trigger"
ANNOTATION_ROLLED_BACK = "tagpin.dev/rolled-back-from"  # the digest that failed
# Opting in, on the workload (see docs/clusters.md).
LABEL_FOLLOW = "tagpin.dev/follow"  # "true": discovered by the reconciler (server-side selection)
FOLLOW_SELECTOR = f"{LABEL_FOLLOW}=true"
ANNOTATION_PAUSED = "tagpin.dev/paused"  # "true": left alone (not discovered, not patched)
ANNOTATION_CONTAINERS = "tagpin.dev/containers"  # "web,migrate": only these containers
CONFLICT_RETRIES = 5


class WorkloadError(Exception):
    transient = True


class Unreachable(WorkloadError):
    """The cluster cannot be reached, is not ready, or rejected tagpin's credentials."""


class Conflict(WorkloadError):
    """409: the workload changed between read and patch."""


class NotFound(WorkloadError):
    transient = False


class Forbidden(WorkloadError):
    transient = False


def is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "yes", "1", "on")


@dataclass
class Workload:
    """A workload as tagpin reads it: its containers' images, annotations and pod selector."""

    resource_version: str
    containers: dict[str, str]
    init_containers: dict[str, str] = field(default_factory=dict)
    template_annotations: dict[str, str] = field(default_factory=dict)
    kind: Kind = Kind.DEPLOYMENT
    namespace: str = ""
    name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    selector: dict[str, Any] | None = None  # spec.selector (LabelSelector); None for CronJobs
    generation: int = 0  # metadata.generation
    spec: dict[str, Any] = field(default_factory=dict)  # as served (replicas, update strategy)
    status: dict[str, Any] = field(default_factory=dict)  # as served (the rollout's progress)

    @property
    def paused(self) -> bool:
        return is_true(self.annotations.get(ANNOTATION_PAUSED))

    def image_of(self, container: str) -> str | None:
        return self.containers.get(container, self.init_containers.get(container))


class Workloads(Protocol):
    def get(self, namespace: str, kind: Kind, name: str) -> Workload: ...

    def patch(self, namespace: str, kind: Kind, name: str, body: dict[str, Any]) -> None: ...


class ChangeFailed(Exception):
    """At least one target failed transiently; the message must be retried."""


class TargetNotApplied(Exception):
    """A permanent failure, recorded on the target. Raised through the idempotency guard so that
    no result is stored for (target, digest): once the cause is fixed, the next enqueue applies."""

    def __init__(self, outcome: dict[str, Any]) -> None:
        super().__init__(outcome.get("error", "not applied"))
        self.outcome = outcome


def pinned_image(current: str, image: str, digest: str) -> str:
    """``<name as the workload writes it>:<tag>@<digest>``; the tag stays readable.

    The workload's own spelling of the repository (``nginx``, ``docker.io/library/nginx``) is kept
    when it names the followed repository; otherwise the followed image's familiar name is used.
    """
    followed = ImageRef.parse(image)
    name = familiar(ImageRef(followed.registry, followed.repository, None, None))
    try:
        running = ImageRef.parse(current)
    except InvalidReference:
        running = None
    if running is not None and running.name == followed.name:
        written = current.split("@", 1)[0]
        head, _, tail = written.rpartition(":")
        name = head if head and "/" not in tail else written
    return f"{name}:{followed.tag}@{digest}"


def template_path(kind: Kind) -> list[str]:
    """Where the pod template sits in a workload of this kind."""
    return ["spec", "jobTemplate", "spec", "template"] if kind is Kind.CRONJOB else ["spec", "template"]


def image_patch(
    kind: Kind,
    resource_version: str,
    container: str,
    init: bool,
    image: str,
    annotations: dict[str, str],
) -> dict[str, Any]:
    """A strategic merge patch for one container's image, with resourceVersion as a precondition.

    Containers merge by name, so the others are untouched.
    """
    template: dict[str, Any] = {
        "metadata": {"annotations": annotations},
        "spec": {("initContainers" if init else "containers"): [{"name": container, "image": image}]},
    }
    body: dict[str, Any] = template
    for key in reversed(template_path(kind)):
        body = {key: body}
    body["metadata"] = {"resourceVersion": resource_version}
    return body


class Applier:
    def __init__(
        self,
        *,
        followed: Callable[[], Mapping[str, FollowedImage]],
        state: StateStore,
        workloads: Callable[[str], Workloads],
        clock: Callable[[], int],
        guard: Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]] | None = None,
        settings: Callable[[], RolloutSettings] = RolloutSettings,
        checks: CheckQueue | None = None,
        promoter: Promoter | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        """Without ``checks`` nothing is verified (``applied`` is final); without ``promoter``
        waves do not advance by themselves."""
        self._followed = followed
        self._state = state
        self._workloads = workloads
        self._clock = clock
        self._settings = settings
        self._checks = checks
        self._promoter = promoter
        self._notifier = notifier
        self._apply_target = guard(self.apply_target) if guard else self.apply_target

    def apply(self, change: Change) -> list[dict[str, Any]]:
        followed = self._followed().get(change.image)
        if followed is None:
            logger.info(
                "change for an image no longer followed; nothing to do", extra={"image": change.image}
            )
            return []
        current = self._state.get_tag(change.image)
        if (
            current is not None
            and current.digest != change.digest
            and current.observed_at > change.observed_at
        ):
            logger.info(
                "change superseded by a newer digest",
                extra={"image": change.image, "digest": change.digest, "current": current.digest},
            )
            return [{"image": change.image, "outcome": "superseded", "current": current.digest}]
        if current is not None and current.blocked and current.digest == change.digest:
            logger.warning(
                "digest marked bad for the tag; not applied until the tag moves",
                extra={"image": change.image, "digest": change.digest, "reason": current.bad_reason},
            )
            return [{"image": change.image, "outcome": "blocked", "reason": current.bad_reason}]
        settings = self._settings()
        now = self._clock()
        promotion = self._state.start_promotion(
            change.image,
            change.digest,
            change.observed_at,
            now,
            trigger=change.trigger,
            correlation_id=change.correlation_id,
            dry_run=settings.dry_run,
        )
        if promotion is None:
            return [{"image": change.image, "outcome": "superseded"}]
        waves = plan(settings, list(followed.targets))
        if promotion.started:
            self._state.image_event(
                change.image,
                change.digest,
                "started" if promotion.status is PromotionStatus.ROLLING else "dry-run-started",
                now,
                detail="waves: " + ", ".join(f"{w.name} ({len(w.targets)})" for w in waves if w.targets),
                trigger=change.trigger,
                correlation_id=change.correlation_id,
            )
        if promotion.status is PromotionStatus.DRY_RUN:
            return self._dry_run(change, waves, settings, promotion.started)
        if promotion.status is PromotionStatus.HALTED:
            return [{"image": change.image, "outcome": "blocked", "reason": promotion.detail}]
        # A complete promotion heals every target (a manual edit, a lost message); a rolling one
        # touches only the waves it has reached.
        last = len(waves) - 1 if promotion.status is PromotionStatus.COMPLETE else promotion.wave
        active = [w for w in waves if w.index <= last]
        states = self._state.get_targets([t.id for w in active for t in w.targets])
        outcomes: list[dict[str, Any]] = []
        failed: list[str] = []
        deferred: list[int] = []
        patched: list[str] = []
        for wave in active:
            for target in wave.targets:
                st = states.get(target.id)
                wait = self._deferral(settings, change, target, st, wave, now)
                if wait is not None:
                    deferred.append(wait)
                    outcomes.append({"target": target.id, "outcome": "deferred"})
                    continue
                outcome = self._apply_one(change, target, settings, failed)
                outcomes.append(outcome)
                if outcome.get("outcome") == "patched":
                    patched.append(target.id)
        if deferred and self._checks is not None:
            self._checks.send(
                Check(
                    kind="retry",
                    image=change.image,
                    digest=change.digest,
                    observed_at=change.observed_at,
                    trigger=change.trigger,
                    correlation_id=change.correlation_id,
                ),
                min(deferred),
            )
        if patched:
            self._applied_notice(change, waves[min(last, len(waves) - 1)], now)
        if self._promoter is not None:
            self._promoter.evaluate(change.image, change.digest)
        if failed:
            raise ChangeFailed("; ".join(failed))
        return outcomes

    def _apply_one(
        self, change: Change, target: Target, settings: RolloutSettings, failed: list[str]
    ) -> dict[str, Any]:
        work = TargetChange(
            target_id=target.id,
            cluster=target.cluster,
            namespace=target.namespace,
            kind=target.kind.value,
            name=target.name,
            container=target.container,
            image=change.image,
            digest=change.digest,
            observed_at=change.observed_at,
            trigger=change.trigger,
            correlation_id=change.correlation_id,
            reconcile_run=change.reconcile_run,
            changed_at=change.changed_at,
        )
        try:
            outcome = self._apply_target(target_change=work)
        except TargetNotApplied as exc:
            outcome = exc.outcome
        except WorkloadError as exc:
            failed.append(f"{target.id}: {exc}")
            outcome = {"target": target.id, "outcome": "failed", "error": str(exc)}
        verifying = outcome.get("outcome") in ("patched", "already-current") and self._verifying(settings)
        if settings.max_concurrent_per_cluster and not verifying:  # the verifier releases it otherwise
            self._state.release_slot(target.cluster, target.id, change.digest)
        return outcome

    def _verifying(self, settings: RolloutSettings) -> bool:
        return settings.verify and self._checks is not None

    def _deferral(
        self,
        settings: RolloutSettings,
        change: Change,
        target: Target,
        st: TargetState | None,
        wave: PlannedWave,
        now: int,
    ) -> int | None:
        """Seconds until the target may be tried again, or None when it may start now."""
        gate = window_gate(settings, target, now)
        wait, reason = gate.opens_in_s, gate.reason
        if gate.open:
            limit = settings.max_concurrent_per_cluster
            stale_ms = (settings.verify_timeout_seconds + 2 * settings.verify_interval_seconds + 600) * 1000
            if not limit or self._state.acquire_slot(
                target.cluster, target.id, change.digest, limit, now, stale_ms
            ):
                return None
            wait = settings.verify_interval_seconds
            reason = f"cluster {target.cluster} has {limit} rollouts in progress (max_concurrent_per_cluster)"
        detail = f"deferred: {reason}"
        logger.info(
            "rollout deferred", extra={"target": target.id, "digest": change.digest, "reason": reason}
        )
        if st is None or st.status is not TargetStatus.APPLIED:  # never interrupt a verification
            self._state.claim_target(
                target.id, change.image, change.digest, change.observed_at, change.trigger, now, detail=detail
            )
        if self._state.claim_notice(change.image, change.digest, f"deferred_{target.id}", now):
            self._state.target_note(target.id, change.digest, "deferred", now, detail, change.trigger)
            self._state.image_event(
                change.image, change.digest, "deferred", now, detail=f"{target.id}: {reason}", wave=wave.name
            )
        return wait

    def _applied_notice(self, change: Change, wave: PlannedWave, now: int) -> None:
        if not self._state.claim_notice(change.image, change.digest, f"applied_{wave.index}", now):
            return
        self._state.image_event(
            change.image,
            change.digest,
            "applied",
            now,
            detail=", ".join(t.id for t in wave.targets),
            wave=wave.name,
            trigger=change.trigger,
            correlation_id=change.correlation_id,
        )
        if self._notifier is not None:
            from tagpin.notify import RolloutEvent

            self._notifier.send(
                RolloutEvent(
                    event="applied",
                    image=change.image,
                    digest=change.digest,
                    wave=wave.name,
                    targets=[t.id for t in wave.targets],
                    at=now,
                    trigger=change.trigger,
                    correlation_id=change.correlation_id,
                )
            )

    def _dry_run(
        self, change: Change, waves: list[PlannedWave], settings: RolloutSettings, first: bool
    ) -> list[dict[str, Any]]:
        """Record what a rollout would do (once per digest); patch nothing."""
        if not first:
            return [{"image": change.image, "outcome": "dry-run", "detail": "plan already recorded"}]
        now = self._clock()
        rows: list[dict[str, Any]] = []
        for wave in waves:
            for target in wave.targets:
                row: dict[str, Any] = {"target": target.id, "wave": wave.name, "outcome": "planned"}
                try:
                    workload = self._workloads(target.cluster).get(target.namespace, target.kind, target.name)
                    running = workload.image_of(target.container)
                    if running is None:
                        row["action"] = f"none: no container {target.container!r}"
                    else:
                        desired = pinned_image(running, change.image, change.digest)
                        row.update(
                            action="none" if running == desired else "patch", current=running, desired=desired
                        )
                        if workload.paused:
                            row["action"] = f"none: annotated {ANNOTATION_PAUSED}"
                except WorkloadError as exc:
                    row["action"] = f"unknown: {type(exc).__name__}: {exc}"
                gate = window_gate(settings, target, now)
                if not gate.open:
                    row["window"] = gate.reason
                rows.append(row)
                detail = f"dry-run, wave {wave.name}: {row['action']}"
                if "desired" in row:
                    detail += f" {row['current']} -> {row['desired']}"
                self._state.target_note(target.id, change.digest, "planned", now, detail, change.trigger)
        self._state.image_event(
            change.image,
            change.digest,
            "dry-run",
            now,
            detail=json.dumps(rows, sort_keys=True),
            trigger=change.trigger,
            correlation_id=change.correlation_id,
        )
        logger.info("dry run: plan recorded, nothing patched", extra={"image": change.image, "plan": rows})
        return rows

    def apply_target(self, target_change: TargetChange) -> dict[str, Any]:
        tc = target_change
        kind = Kind(tc.kind)
        if not self._state.claim_target(
            tc.target_id, tc.image, tc.digest, tc.observed_at, tc.trigger, self._clock()
        ):
            return {"target": tc.target_id, "outcome": "superseded"}
        previous: str | None = None
        try:
            workloads = self._workloads(tc.cluster)
            previous, outcome = self._patch(workloads, tc, kind)
        except WorkloadError as exc:
            status = {NotFound: TargetStatus.GONE, Paused: TargetStatus.PAUSED}.get(
                type(exc), TargetStatus.FAILED
            )
            detail = f"{type(exc).__name__}: {exc}"
            self._finish(tc, status, detail=detail)
            logger.warning(
                "apply failed", extra={"target": tc.target_id, "digest": tc.digest, "error": detail}
            )
            if exc.transient:
                raise
            raise TargetNotApplied(
                {"target": tc.target_id, "outcome": status.value, "error": detail}
            ) from None
        # already-current: nothing was replaced, so the previous image stays the one last replaced.
        self._finish(
            tc, TargetStatus.APPLIED, detail=outcome, previous=previous if outcome == "patched" else None
        )
        logger.info("applied", extra={"target": tc.target_id, "digest": tc.digest, "outcome": outcome})
        settings = self._settings()
        if self._checks is not None and settings.verify:
            self._checks.send(
                Check(
                    kind="verify",
                    image=tc.image,
                    digest=tc.digest,
                    observed_at=tc.observed_at,
                    target_id=tc.target_id,
                    applied_at=self._clock(),
                    trigger=tc.trigger,
                    correlation_id=tc.correlation_id,
                ),
                settings.verify_interval_seconds if outcome == "patched" else 0,
            )
        return {"target": tc.target_id, "outcome": outcome, "previous_image": previous}

    def _patch(self, workloads: Workloads, tc: TargetChange, kind: Kind) -> tuple[str, str]:
        for _attempt in range(CONFLICT_RETRIES):
            workload = workloads.get(tc.namespace, kind, tc.name)
            if workload.paused:
                raise Paused(f"{kind.value} {tc.namespace}/{tc.name} is annotated {ANNOTATION_PAUSED}")
            init = tc.container not in workload.containers
            current = (workload.init_containers if init else workload.containers).get(tc.container)
            if current is None:
                raise _MissingContainer(
                    f"{kind.value} {tc.namespace}/{tc.name} has no container {tc.container!r}"
                )
            desired = pinned_image(current, tc.image, tc.digest)
            if current == desired:
                return current, "already-current"
            digests = _json_map(workload.template_annotations.get(ANNOTATION_DIGESTS))
            digests[tc.container] = tc.digest
            annotations = {
                ANNOTATION_DIGESTS: json.dumps(digests, sort_keys=True, separators=(",", ":")),
                ANNOTATION_APPLIED_AT: datetime.fromtimestamp(self._clock() / 1000, UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
                ANNOTATION_TRIGGER: tc.trigger,
            }
            body = image_patch(kind, workload.resource_version, tc.container, init, desired, annotations)
            try:
                workloads.patch(tc.namespace, kind, tc.name, body)
                return current, "patched"
            except Conflict:
                logger.info("conflict; re-reading", extra={"target": tc.target_id})
        raise Conflict(f"still conflicting after {CONFLICT_RETRIES} attempts")

    def _finish(
        self, tc: TargetChange, status: TargetStatus, *, detail: str, previous: str | None = None
    ) -> None:
        self._state.finish_target(
            tc.target_id,
            tc.digest,
            status,
            self._clock(),
            trigger=tc.trigger,
            detail=detail,
            previous_image=previous,
            correlation_id=tc.correlation_id,
        )


def restore(workloads: Workloads, target: Target, previous: str | None, digest: str, now: int) -> str:
    """Put ``previous`` back on the target's container if it still runs ``digest``.

    Returns "restored", "not-running" (the container does not run the failed digest: nothing to
    undo) or "no-previous" (tagpin did not replace anything there: nothing to restore)."""
    for _attempt in range(CONFLICT_RETRIES):
        workload = workloads.get(target.namespace, target.kind, target.name)
        init = target.container not in workload.containers
        current = workload.image_of(target.container)
        if previous is not None and current == previous:
            return "restored"  # by an earlier attempt
        if current is None or not current.endswith("@" + digest):
            return "not-running"
        if previous is None or previous.endswith("@" + digest):
            return "no-previous"
        digests = _json_map(workload.template_annotations.get(ANNOTATION_DIGESTS))
        _name, at, was = previous.rpartition("@")
        if at:
            digests[target.container] = was
        else:
            digests.pop(target.container, None)
        annotations = {
            ANNOTATION_DIGESTS: json.dumps(digests, sort_keys=True, separators=(",", ":")),
            ANNOTATION_APPLIED_AT: datetime.fromtimestamp(now / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            ANNOTATION_TRIGGER: "rollback",
            ANNOTATION_ROLLED_BACK: digest,
        }
        body = image_patch(
            target.kind, workload.resource_version, target.container, init, previous, annotations
        )
        try:
            workloads.patch(target.namespace, target.kind, target.name, body)
            return "restored"
        except Conflict:
            logger.info("conflict; re-reading", extra={"target": target.id})
    raise Conflict(f"still conflicting after {CONFLICT_RETRIES} attempts")


class _MissingContainer(WorkloadError):
    transient = False


class Paused(WorkloadError):
    """The workload asks to be left alone; recorded, not retried, applied once un-paused."""

    transient = False


def _json_map(text: str | None) -> dict[str, str]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
