"""Safe rollouts end to end: the real poller, consumer and verifier handlers on the local stack
(moto server, the real registry, two Kubernetes control planes reached through kubeconfigs), with
the SQS loops running: the changes FIFO queue into the consumer, the delayed checks queue into the
verifier. Pods take ``ROLLOUT_DELAY`` s to become Ready (kwok), so the real controllers roll out in
a second or two; verification re-checks every second; soak times are a few seconds.

Waves: ``stage`` (cluster stage) then ``prod`` (cluster prod). Each scenario follows its own image.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tagpin.ports.state import PromotionStatus, TargetStatus
from tagpin_local.kube.manifests import daemonset, deployment, statefulset
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import recorded_status as recorded
from tests.support.stack import running, state_of, wait_for
from tests.support.stack import target_status as status

pytestmark = pytest.mark.integration

ROLLOUT_DELAY = 0.4
SOAK_S = 2
DEADLINE_S = 10  # progressDeadlineSeconds of a Deployment that gets a broken image (600 by default)
ROLLOUT: dict[str, Any] = {
    "verify_interval_seconds": 1,
    "verify_timeout_seconds": 20,
    "soak_seconds": SOAK_S,
    "waves": [{"name": "stage", "clusters": ["stage"]}, {"name": "prod", "clusters": ["prod"]}],
}


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=False,
        poll_interval=None,
        consume=True,
        clusters=["stage", "prod"],
        rollout=ROLLOUT,
        rollout_delay=ROLLOUT_DELAY,
    )
    with LocalStack(options) as stack:
        yield stack


def configure(st: LocalStack, images: list[dict[str, Any]], **rollout: Any) -> None:
    st.options.images = images
    st.options.rollout = {**ROLLOUT, **rollout}
    st.write_config()


def follow(st: LocalStack, repo: str, workloads: list[tuple[str, dict[str, Any]]]) -> tuple[str, list[str]]:
    """Create the workloads (cluster, object) running ``<registry>/<repo>:stable``; follow the tag."""
    assert st.registry is not None
    image = f"{st.registry.host}/{repo}:stable"
    targets = []
    for cluster, obj in workloads:
        st.kubes[cluster].create(obj)
        meta = obj["metadata"]
        targets.append(
            {
                "cluster": cluster,
                "namespace": meta.get("namespace", "default"),
                "kind": obj["kind"],
                "name": meta["name"],
                "container": "app",
            }
        )
    ids = [f"{t['cluster']}/{t['namespace']}/{t['kind']}/{t['name']}/app" for t in targets]
    st.options.images = [*st.options.images, {"image": image, "targets": targets}]
    return image, ids


def patches_of(st: LocalStack, target_id: str, digest: str) -> list[dict[str, Any]]:
    """The target's history items for ``digest`` (oldest first)."""
    return [h for h in reversed(state_of(st).history.of_target(target_id)) if h.digest == digest]


def push(st: LocalStack, repo: str) -> str:
    assert st.registry is not None
    digest = push_image(st.registry.url, repo, "stable")
    st.run_poller()
    return digest


def promotion_status(st: LocalStack, image: str) -> PromotionStatus | None:
    promotion = state_of(st).promotions.get(image)
    return None if promotion is None else promotion.status


def events(st: LocalStack, image: str, digest: str) -> list[str]:
    return [e.event for e in reversed(state_of(st).history.of_image(image)) if e.digest == digest]


def test_a_broken_digest_is_rolled_back_in_stage_and_never_reaches_prod(st: LocalStack) -> None:
    image, (stage, prod) = follow(
        st,
        "demo/shop",
        [
            ("stage", deployment("shop", "shop", "placeholder", replicas=2, progress_deadline=DEADLINE_S)),
            ("prod", deployment("shop", "shop", "placeholder", replicas=3, progress_deadline=DEADLINE_S)),
        ],
    )
    configure(st, st.options.images)
    good = push(st, "demo/shop")
    wait_for(
        "the good digest verified in both waves", lambda: status(st, prod, good) is TargetStatus.VERIFIED
    )
    st.notifications()  # forget the good rollout's notifications

    bad = push_image(st.registry.url, "demo/shop", "stable")  # type: ignore[union-attr]
    st.kubes["stage"].break_image(bad)
    st.kubes["prod"].break_image(bad)
    st.run_poller()
    wait_for("stage rolled back", lambda: status(st, stage, bad) is TargetStatus.ROLLED_BACK)
    failed = next(h for h in patches_of(st, stage, bad) if h.status == "failed")
    assert "ProgressDeadlineExceeded" in (failed.detail or "")  # the deployment controller said so

    assert running(st, stage).endswith("@" + good)  # the previous image is back
    tag = state_of(st).tags.get(image)
    assert tag is not None and tag.digest == bad and tag.blocked and stage in (tag.bad_reason or "")
    wait_for("the promotion halted", lambda: promotion_status(st, image) is PromotionStatus.HALTED)
    promotion = state_of(st).promotions.get(image)
    assert promotion is not None and promotion.wave == 0
    history = [h.status for h in patches_of(st, stage, bad)]
    assert history == ["applied", "failed", "rolled_back"]

    # Nothing brings the bad digest back: the poller, the reconciler (which sees stage "behind")...
    st.run_poller()
    st.run_reconciler()
    time.sleep(SOAK_S + 2 * ROLLOUT_DELAY + 1)
    assert running(st, stage).endswith("@" + good)
    assert running(st, prod).endswith("@" + good)  # prod never saw it
    assert patches_of(st, prod, bad) == []
    assert status(st, stage, bad) is TargetStatus.ROLLED_BACK
    published = [n for n in st.notifications() if n["digest"] == bad]
    assert [(n["event"], n["wave"]) for n in published] == [("applied", "stage"), ("rolled_back", "stage")]
    assert events(st, image, bad)[-2:] == ["failed", "rolled_back"]

    # ...until the tag moves to another digest: then the next push rolls as usual.
    fixed = push(st, "demo/shop")
    wait_for("the fixed digest verified in prod", lambda: status(st, prod, fixed) is TargetStatus.VERIFIED)
    assert not state_of(st).tags.get(image).blocked  # type: ignore[union-attr]


def test_a_good_digest_walks_through_both_waves_after_the_soak(st: LocalStack) -> None:
    image, ids = follow(
        st,
        "demo/api",
        [
            ("stage", deployment("api", "api", "placeholder", container="app", replicas=2)),
            ("stage", statefulset("db", "api", "placeholder", container="app", replicas=2)),
            ("prod", deployment("api", "api", "placeholder", container="app", replicas=3)),
            ("prod", daemonset("agent", "api", "placeholder", container="app")),
        ],
    )
    stage_ids, prod_ids = ids[:2], ids[2:]
    configure(st, st.options.images)
    st.notifications()
    digest = push(st, "demo/api")
    wait_for("prod verified", lambda: all(status(st, t, digest) is TargetStatus.VERIFIED for t in prod_ids))

    def at(target_id: str, wanted: str) -> int:
        return next(h.at for h in patches_of(st, target_id, digest) if h.status == wanted)

    stage_verified = max(at(t, "verified") for t in stage_ids)
    prod_applied = min(at(t, "applied") for t in prod_ids)
    assert prod_applied >= stage_verified + SOAK_S * 1000  # the next wave waited for the soak
    assert all(status(st, t, digest) is TargetStatus.VERIFIED for t in stage_ids)
    assert all(running(st, t).endswith("@" + digest) for t in ids)
    # The verifier invocation that finds the last target verified completes the promotion right
    # after (with several containers, not necessarily the one that verified it): it ends the
    # promotion (the conditional write one invocation wins), then records the history event.
    wait_for(
        "the promotion complete",
        lambda: (
            promotion_status(st, image) is PromotionStatus.COMPLETE
            and "complete" in events(st, image, digest)
        ),
    )
    trail = events(st, image, digest)  # items of the same millisecond sort by name
    assert sorted(trail) == sorted(
        ["started", "applied", "verified", "wave-started", "applied", "verified", "complete"]
    )
    assert trail.index("verified") < trail.index("wave-started") < len(trail) - 3
    published = [(n["event"], n["wave"], n["complete"]) for n in st.notifications() if n["digest"] == digest]
    assert published == [
        ("applied", "stage", False),
        ("verified", "stage", False),
        ("applied", "prod", False),
        ("verified", "prod", True),
    ]


def test_a_newer_digest_mid_promotion_supersedes_the_older_one(st: LocalStack) -> None:
    image, (stage, prod) = follow(
        st,
        "demo/cart",
        [
            ("stage", deployment("cart", "cart", "placeholder", container="app")),
            ("prod", deployment("cart", "cart", "placeholder", container="app")),
        ],
    )
    # The stage soak must outlast the second digest's way to the consumer (under a second on an
    # idle machine), or the first digest would rightly be promoted before the second is seen.
    configure(st, st.options.images, soak_seconds=6)
    first = push(st, "demo/cart")
    wait_for("the first digest verified in stage", lambda: status(st, stage, first) is TargetStatus.VERIFIED)
    assert status(st, prod, first) is None  # soaking in stage
    second = push(st, "demo/cart")
    wait_for("the second digest verified in prod", lambda: status(st, prod, second) is TargetStatus.VERIFIED)
    time.sleep(1)
    assert patches_of(st, prod, first) == []  # the older digest never reached prod
    assert running(st, stage).endswith("@" + second) and running(st, prod).endswith("@" + second)
    assert "wave-started" not in events(st, image, first)
    wait_for("the promotion complete", lambda: promotion_status(st, image) is PromotionStatus.COMPLETE)
    promotion = state_of(st).promotions.get(image)
    assert promotion is not None and promotion.digest == second


def test_a_maintenance_window_defers_the_rollout_then_applies_it(st: LocalStack) -> None:
    _image, (target,) = follow(
        st, "demo/pay", [("prod", deployment("pay", "pay", "placeholder", container="app"))]
    )
    # far enough ahead that a busy machine still sees the deferral before the window opens
    opens = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=15)
    window = {
        "clusters": ["prod"],
        "start": opens.strftime("%H:%M:%S"),
        "end": (opens + timedelta(minutes=30)).strftime("%H:%M:%S"),
    }
    configure(st, st.options.images, waves=[], maintenance_windows=[window])
    digest = push(st, "demo/pay")
    wait_for("deferred", lambda: status(st, target, digest) is TargetStatus.PENDING)
    assert not running(st, target).endswith("@" + digest)
    assert "maintenance window" in (state_of(st).targets.get(target).detail or "")  # type: ignore[union-attr]
    wait_for("verified once the window opened", lambda: recorded(st, target, digest) is TargetStatus.VERIFIED)
    applied = next(h.at for h in patches_of(st, target, digest) if h.status == "applied")
    assert applied >= opens.timestamp() * 1000
    assert [h.status for h in patches_of(st, target, digest)] == ["deferred", "applied", "verified"]


def test_dry_run_records_the_plan_and_patches_nothing(st: LocalStack) -> None:
    image, (stage, prod) = follow(
        st,
        "demo/dry",
        [
            ("stage", deployment("dry", "dry", "placeholder", container="app")),
            ("prod", deployment("dry", "dry", "placeholder", container="app")),
        ],
    )
    configure(st, st.options.images, dry_run=True)
    for kube in st.kubes.values():
        kube.clear_requests()
    digest = push(st, "demo/dry")
    wait_for("the plan recorded", lambda: "dry-run" in events(st, image, digest))
    st.run_poller()  # seen again: the plan is recorded once
    time.sleep(1.5)
    # none even sent (a refused one counts too): a dry run never tries
    assert all(kube.count("PATCH") == 0 for kube in st.kubes.values())
    assert running(st, stage) == "placeholder" and running(st, prod) == "placeholder"
    assert state_of(st).targets.get(stage) is None and state_of(st).targets.get(prod) is None
    assert events(st, image, digest) == ["dry-run-started", "dry-run"]
    (plan,) = [e for e in state_of(st).history.of_image(image) if e.event == "dry-run"]
    assert f'"desired": "{image}@{digest}"'.replace(":stable@", ":stable@") in (plan.detail or "")
    assert '"wave": "stage"' in (plan.detail or "") and '"wave": "prod"' in (plan.detail or "")
    # stage is patched when the promotion starts; prod waits for stage (what the consumer does)
    for target, action in (
        (stage, "wave stage: patch"),
        (prod, "wave prod: wait: wave prod waits for wave stage"),
    ):
        (note,) = patches_of(st, target, digest)
        assert note.status == "planned" and action in (note.detail or ""), note.detail
        assert f"-> {image}@{digest}" in (note.detail or "")  # what it would be patched to


def test_a_paused_deployment_waits_for_its_resume_and_is_then_verified(st: LocalStack) -> None:
    """`kubectl rollout pause`: the deployment controller rolls nothing out and reports
    ``DeploymentPaused``; the verification waits past its timeout, since that is not the image's
    failure, and verifies once a person resumes it. (It used to time out: the digest marked bad,
    the previous image patched back, the promotion halted.)"""
    image, (target,) = follow(st, "demo/paused", [("stage", deployment("paused", "paused", "placeholder"))])
    timeout_s = 4
    configure(st, st.options.images, waves=[], verify_timeout_seconds=timeout_s)
    kubectl = st.kubes["stage"].kube.kubectl
    kubectl("rollout", "status", "deployment/paused", "-n", "paused", "--timeout=60s")
    kubectl("rollout", "pause", "deployment/paused", "-n", "paused")
    digest = push(st, "demo/paused")
    wait_for("patched", lambda: running(st, target).endswith("@" + digest))
    time.sleep(2 * timeout_s + 1)  # paused for longer than the verify timeout
    assert status(st, target, digest) is TargetStatus.APPLIED  # waiting, not failed
    assert not state_of(st).tags.get(image).blocked  # type: ignore[union-attr]
    kubectl("rollout", "resume", "deployment/paused", "-n", "paused")
    wait_for("verified once resumed", lambda: recorded(st, target, digest) is TargetStatus.VERIFIED)
    assert [h.status for h in patches_of(st, target, digest)] == ["applied", "verified"]
