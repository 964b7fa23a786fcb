"""Pure parts of safe rollouts: health of a rollout, waves, maintenance windows, notifications,
the configuration's errors, the bad-digest mark in the state table."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from tagpin.adapters.notify import Notifier
from tagpin.domain.config import (
    ConfigError,
    Kind,
    NotificationSettings,
    RolloutSettings,
    Target,
    parse_config,
)
from tagpin.domain.kinds import Progress
from tagpin.domain.messages import Trigger
from tagpin.ports.notify import RolloutEvent
from tagpin.ports.state import PromotionStatus, State
from tagpin.usecases.admission.window import window_decision
from tagpin.usecases.waves import plan

from tests.support.constants import D1, D2
from tests.support.notify import FakeSns
from tests.support.trail import end_promotion, start_promotion


# -- health ----------------------------------------------------------------------------------------
def deployment_status(**status: Any) -> dict[str, Any]:
    return {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3, **status}


@pytest.mark.parametrize(
    ("status", "progress"),
    [
        (deployment_status(), Progress.COMPLETE),
        (deployment_status(observedGeneration=1), Progress.PROGRESSING),
        (deployment_status(updatedReplicas=1), Progress.PROGRESSING),
        (deployment_status(replicas=4), Progress.PROGRESSING),  # an old pod still terminating
        (deployment_status(availableReplicas=2), Progress.PROGRESSING),
        (
            deployment_status(
                updatedReplicas=1,
                conditions=[{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
            ),
            Progress.FAILED,
        ),
        (  # paused by a person (kubectl rollout pause): the controller says so, and rolls nothing out
            deployment_status(
                updatedReplicas=0,
                conditions=[{"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused"}],
            ),
            Progress.PAUSED,
        ),
        (  # paused after its rollout ended: complete
            deployment_status(
                conditions=[{"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused"}]
            ),
            Progress.COMPLETE,
        ),
    ],
)
def test_deployment_rollout(status: dict[str, Any], progress: Progress) -> None:
    assert Kind.DEPLOYMENT.profile.rollout_health(2, {"replicas": 3}, status).progress is progress


# A deadline the controller recorded at 12:00:00 (as it serves it: whole seconds, UTC).
DEADLINE_AT = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
EXCEEDED = deployment_status(
    updatedReplicas=1,
    conditions=[
        {
            "type": "Progressing",
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": 'ReplicaSet "web-5d8" has timed out progressing.',
            "lastUpdateTime": DEADLINE_AT.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    ],
)


@pytest.mark.parametrize(
    ("began_ms", "progress"),
    [
        # the patch came after the deadline was recorded (a return to an image whose ReplicaSet
        # exists): the controller observed the generation but has not replaced the old condition
        (int(DEADLINE_AT.timestamp() * 1000) + 700, Progress.PROGRESSING),
        (int(DEADLINE_AT.timestamp() * 1000) + 60_000, Progress.PROGRESSING),
        # the deadline came after the patch: this rollout's own failure
        (int(DEADLINE_AT.timestamp() * 1000) - 600_000, Progress.FAILED),
        (int(DEADLINE_AT.timestamp() * 1000), Progress.FAILED),
        (None, Progress.FAILED),  # asked without the rollout's start (tagpin doctor, the console)
    ],
)
def test_a_deadline_recorded_before_the_rollout_began_is_an_earlier_rollouts(
    began_ms: int | None, progress: Progress
) -> None:
    health = Kind.DEPLOYMENT.profile.rollout_health(2, {"replicas": 3}, EXCEEDED)
    health = health if began_ms is None else health.after(began_ms)
    assert health.progress is progress
    assert "ProgressDeadlineExceeded" in health.reason


def test_a_deadline_without_its_time_is_a_failure_whenever_the_rollout_began() -> None:
    undated = deployment_status(
        conditions=[{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]
    )
    health = Kind.DEPLOYMENT.profile.rollout_health(2, {"replicas": 3}, undated).after(10**13)
    assert health.progress is Progress.FAILED


def test_a_paused_deployment_is_paused_before_its_controller_says_so() -> None:
    status = deployment_status(updatedReplicas=0)
    health = Kind.DEPLOYMENT.profile.rollout_health(2, {"replicas": 3, "paused": True}, status)
    assert health.progress is Progress.PAUSED and health.reason.startswith("Paused: DeploymentPaused")
    assert Kind.DEPLOYMENT.profile.rollout_health(2, {"replicas": 3}, status).progress is Progress.PROGRESSING


def test_statefulset_and_daemonset_and_cronjob() -> None:
    done = {
        "observedGeneration": 1,
        "readyReplicas": 2,
        "updatedReplicas": 2,
        "currentRevision": "a",
        "updateRevision": "a",
    }
    assert Kind.STATEFULSET.profile.rollout_health(1, {"replicas": 2}, done).progress is Progress.COMPLETE
    moving = {**done, "updateRevision": "b", "updatedReplicas": 1}
    assert (
        Kind.STATEFULSET.profile.rollout_health(1, {"replicas": 2}, moving).progress is Progress.PROGRESSING
    )
    partitioned = {
        "replicas": 2,
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
    }
    assert Kind.STATEFULSET.profile.rollout_health(1, partitioned, moving).progress is Progress.COMPLETE
    on_delete = {"replicas": 2, "updateStrategy": {"type": "OnDelete"}}
    assert (
        Kind.STATEFULSET.profile.rollout_health(1, on_delete, {"observedGeneration": 1}).progress
        is Progress.COMPLETE
    )
    ds = {
        "observedGeneration": 3,
        "desiredNumberScheduled": 2,
        "updatedNumberScheduled": 2,
        "numberAvailable": 1,
    }
    assert Kind.DAEMONSET.profile.rollout_health(3, {}, ds).progress is Progress.PROGRESSING
    assert (
        Kind.DAEMONSET.profile.rollout_health(3, {}, {**ds, "numberAvailable": 2}).progress
        is Progress.COMPLETE
    )
    assert Kind.CRONJOB.profile.rollout_health(5, {}, {}).progress is Progress.COMPLETE


# -- waves and windows -------------------------------------------------------------------------------
def target(cluster: str, namespace: str = "shop") -> Target:
    return Target(cluster=cluster, namespace=namespace, kind=Kind.DEPLOYMENT, name="web", container="web")


def test_targets_join_the_first_matching_wave_and_the_rest_comes_last() -> None:
    settings = RolloutSettings.model_validate(
        {
            "waves": [
                {"name": "canary", "clusters": ["prod"], "namespaces": ["canary"]},
                {"name": "stage", "clusters": ["stage"]},
                {"name": "prod", "clusters": ["prod"]},
            ]
        }
    )
    waves = plan(settings, [target("prod"), target("prod", "canary"), target("stage"), target("lab")])
    assert [(w.name, [t.id.split("/")[0] + "/" + t.namespace for t in w.targets]) for w in waves] == [
        ("canary", ["prod/canary"]),
        ("stage", ["stage/shop"]),
        ("prod", ["prod/shop"]),
        ("rest", ["lab/shop"]),
    ]
    assert [w.name for w in plan(RolloutSettings(), [target("a")])] == ["all"]


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def test_maintenance_windows() -> None:
    settings = RolloutSettings.model_validate(
        {
            "maintenance_windows": [
                {"clusters": ["prod"], "days": ["mon", "tue"], "start": "22:00", "end": "02:00"},
                {"targets": ["lab/*"], "start": "09:00", "end": "10:00", "timezone": "Europe/Paris"},
            ]
        }
    )
    assert window_decision(settings, target("stage"), ms("2026-11-18T12:00:00")).goes  # not covered
    monday_night, tuesday_early = ms("2026-11-16T23:00:00"), ms("2026-11-17T01:30:00")
    assert window_decision(settings, target("prod"), monday_night).goes
    assert window_decision(settings, target("prod"), tuesday_early).goes  # over midnight
    closed = window_decision(settings, target("prod"), ms("2026-11-17T12:00:00"))  # Tuesday noon
    assert not closed.goes and closed.wait_s == 10 * 3600 and "2026-11-17T22:00:00Z" in closed.reason
    wednesday_early = window_decision(
        settings, target("prod"), ms("2026-11-19T01:00:00")
    )  # opened Wednesday? no
    assert not wednesday_early.goes
    assert window_decision(settings, target("lab"), ms("2026-11-18T08:30:00")).goes  # 09:30 in Paris
    assert not window_decision(settings, target("lab"), ms("2026-11-18T09:30:00")).goes


def test_configuration_errors_name_the_field() -> None:
    base = "clusters: {stage: {kubeconfig: {file: k}}}\n"
    cases = {
        "rollout: {waves: [{name: a, clusters: [prod]}]}": "rollout.waves.0.clusters.0: unknown cluster",
        "rollout: {waves: [{name: a, clusters: [stage]}, {name: a, clusters: [stage]}]}": "waves.1.name",
        "rollout: {maintenance_windows: [{start: '09:00', end: '09:00'}]}": "rollout.maintenance_windows.0",
        "rollout: {maintenance_windows: [{start: '09:00', end: '10:00', timezone: Nowhere/X}]}": "timezone",
        "rollout: {verify_interval_seconds: 0}": "rollout.verify_interval_seconds",
        "rollout: {notifications: {webhooks_secret: other/x}}": "rollout.notifications.webhooks_secret",
        "rollout: {max_concurrent_per_cluster: 0}": "rollout.max_concurrent_per_cluster",
    }
    for text, expected in cases.items():
        with pytest.raises(ConfigError, match=expected.replace(".", r"\.")):
            parse_config(base + text)


# -- notifications -----------------------------------------------------------------------------------
def event() -> RolloutEvent:
    return RolloutEvent(
        event="rolled_back",
        image="r/x:stable",
        digest=D1,
        wave="stage",
        targets=["stage/a/Deployment/x/x"],
        at=1,
    )


def test_one_event_goes_to_sns_and_every_configured_webhook(caplog: pytest.LogCaptureFixture) -> None:
    sns, posted = FakeSns(), []
    secret = "https://hooks.example/T000/SECRET-TOKEN"

    def post(url: str, body: dict[str, Any]) -> None:
        posted.append((url, body))
        if "teams" in url:
            raise OSError("teams is down")

    notifier = Notifier(
        settings=lambda: NotificationSettings(webhooks_secret="tagpin/notifications/notify"),
        sns=sns,
        topic_arn="arn:aws:sns:us-east-1:123456789012:tagpin-rollouts",
        secret=lambda name: {
            "slack": secret,
            "teams": "https://teams.example/x",
            "http": "https://h.example/y",
        },
        post=post,
    )
    with caplog.at_level(logging.WARNING):
        notifier.send(event())
    (message,) = sns.published
    assert json.loads(message["Message"])["event"] == "rolled_back"
    assert message["MessageAttributes"]["event"]["StringValue"] == "rolled_back"
    assert "rolled back" in message["Subject"]
    bodies = {url: body for url, body in posted}
    assert "FAILED in wave stage and rolled back" in bodies[secret]["text"]
    assert bodies["https://teams.example/x"]["@type"] == "MessageCard"
    assert bodies["https://h.example/y"]["targets"] == ["stage/a/Deployment/x/x"]
    (failure,) = [r for r in caplog.records if r.getMessage() == "notification webhook failed"]
    assert failure.kind == "teams"  # type: ignore[attr-defined]  # logged, not raised
    assert all("SECRET-TOKEN" not in str(r.__dict__) for r in caplog.records)


def test_sns_off_and_no_secret_sends_nothing() -> None:
    sns = FakeSns()
    Notifier(settings=lambda: NotificationSettings(sns=False), sns=sns, topic_arn="arn", secret=dict).send(
        event()
    )
    assert sns.published == []


# -- the bad-digest mark ----------------------------------------------------------------------------
def test_a_bad_digest_blocks_the_tag_until_it_moves(store: State) -> None:
    image = "r/x:stable"
    store.tags.record(image, D1, 100, "poll")
    assert store.tags.mark_bad(image, D1, "stage/…: ProgressDeadlineExceeded", 110)
    assert store.tags.get(image).blocked  # type: ignore[union-attr]
    store.tags.record(image, D1, 200, "poll")  # seen again: still blocked
    assert store.tags.get(image).blocked  # type: ignore[union-attr]
    assert not store.tags.mark_bad(image, D2, "not the tag's digest", 120)
    store.tags.record(image, D2, 300, "poll")  # the tag moved: the mark is gone
    tag = store.tags.get(image)
    assert tag is not None and not tag.blocked and tag.bad_digest is None
    store.tags.record(image, D1, 400, "poll")  # and back: D1 may be tried again
    assert not store.tags.get(image).blocked  # type: ignore[union-attr]


# -- promotions and concurrency slots in the state table ---------------------------------------------
def test_cluster_slots_limit_concurrent_rollouts_and_reclaim_stale_ones(store: State) -> None:
    assert store.slots.acquire("prod", "t1", D1, 1, 1_000, 10_000)
    assert store.slots.acquire("prod", "t1", D1, 1, 1_001, 10_000)  # held already
    assert not store.slots.acquire("prod", "t2", D1, 1, 1_002, 10_000)  # full
    assert store.slots.acquire("prod", "t2", D1, 1, 20_000, 10_000)  # t1's verification never ended
    store.slots.release("prod", "t2", D2)  # another digest's check does not release it
    assert store.slots.holders("prod") == {"t2": D1}
    store.slots.release("prod", "t2", D1)
    assert store.slots.holders("prod") == {}


def test_promotion_transitions_happen_once(store: State) -> None:
    image = "r/x:stable"
    first = start_promotion(store, image, D1, 11, observed_at=10)
    assert first is not None and first.started and first.status is PromotionStatus.ROLLING
    again = start_promotion(store, image, D1, 21, observed_at=20)
    assert again is not None and not again.started  # the same digest seen later: the same promotion
    assert store.promotions.wave_verified(image, D1, 0, 30) and not store.promotions.wave_verified(
        image, D1, 0, 31
    )
    assert store.promotions.advance(image, D1, 0, 40) and not store.promotions.advance(image, D1, 0, 41)
    assert store.promotions.claim_notice(image, D1, "verified_0", 1) and not store.promotions.claim_notice(
        image, D1, "verified_0", 2
    )
    newer = start_promotion(store, image, D2, 51, observed_at=50, trigger=Trigger.WEBHOOK, correlation_id="c")
    assert newer is not None and newer.started and newer.wave == 0  # supersedes, from wave 1 again
    assert start_promotion(store, image, D1, 52, observed_at=30) is None
    assert not store.promotions.advance(image, D1, 1, 60)  # the older digest advances no more
    assert end_promotion(store, image, D2, PromotionStatus.HALTED, 70, "failed")
    assert not end_promotion(store, image, D2, PromotionStatus.COMPLETE, 71, "late")


def test_dry_run_promotion_is_replaced_when_dry_run_is_turned_off(store: State) -> None:
    image = "r/y:stable"
    plan = start_promotion(store, image, D1, 11, observed_at=10, dry_run=True)
    assert plan is not None and plan.status is PromotionStatus.DRY_RUN
    again = start_promotion(store, image, D1, 21, observed_at=20, dry_run=True)
    assert again is not None and not again.started  # the plan is recorded once
    live = start_promotion(store, image, D1, 31, observed_at=30)
    assert live is not None and live.started and live.status is PromotionStatus.ROLLING
