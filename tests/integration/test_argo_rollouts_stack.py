"""Argo Rollouts end to end: the real reconciler, poller, consumer and verifier handlers on the
local stack (moto server, the real registry, a real API server with Argo Rollouts' CRD reached
through a kubeconfig), with the SQS loops running. The stand-in of Argo's controller
(tools/tagpin_local/kube/argo.py) rolls a new template out through its ReplicaSets: ``Progressing``
then ``Healthy``; ``Degraded`` once a broken image misses its progress deadline; ``Paused`` at a
canary pause step until promoted.

Each scenario follows its own image; all in the "local" cluster.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin.ports.state import PromotionStatus, TargetStatus
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.manifests import rollout
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.constants import FOLLOW
from tests.support.stack import recorded_status as recorded
from tests.support.stack import state_of, wait_for
from tests.support.stack import target_status as status

pytestmark = pytest.mark.integration

ROLLOUT_DELAY = 0.4
DEADLINE_S = 8  # progressDeadlineSeconds of the Rollout that gets a broken image (600 by default)
ROLLOUT: dict[str, Any] = {"verify_interval_seconds": 1, "verify_timeout_seconds": 20, "waves": []}
PAUSE_STEPS = [{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}]


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=False, poll_interval=None, consume=True, rollout=ROLLOUT, rollout_delay=ROLLOUT_DELAY
    )
    with LocalStack(options) as stack:
        yield stack


def kube(st: LocalStack) -> LocalCluster:
    return st.kubes["local"]


def follow(st: LocalStack, repo: str, *configured: str, **rollout_settings: Any) -> tuple[str, list[str]]:
    """Follow ``<registry>/<repo>:stable`` in the Rollouts ``configured`` (namespace shop, container app)."""
    assert st.registry is not None
    image = f"{st.registry.host}/{repo}:stable"
    targets = [
        {"cluster": "local", "namespace": "shop", "kind": "Rollout", "name": name, "container": "app"}
        for name in configured
    ]
    st.options.images = [*st.options.images, {"image": image, "targets": targets}]
    st.options.rollout = {**ROLLOUT, **rollout_settings}
    st.write_config()
    return image, [f"local/shop/Rollout/{name}/app" for name in configured]


def spec_image(st: LocalStack, name: str) -> str:
    obj = kube(st).get("Rollout", "shop", name)
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def pod_digests(st: LocalStack, name: str) -> set[str]:
    """The digests the Rollout's running pods report (a pod that cannot pull its image has none)."""
    return {
        p["status"]["containerStatuses"][0]["imageID"].rsplit("@", 1)[-1]
        for p in kube(st).pods_for("Rollout", "shop", name)
        if p["status"].get("phase") == "Running"
    }


def history(st: LocalStack, target_id: str, digest: str) -> list[str]:
    return [h.status for h in reversed(state_of(st).history.of_target(target_id)) if h.digest == digest]


def recorded_trail(st: LocalStack, target_id: str, digest: str, last: str) -> list[str]:
    """The target's history of ``digest`` once its item ``last`` is written. The consumer writes a
    history item just after the state it records (DynamoTargets.finish): a test that saw the state
    may read the history before that item lands (CI of stop 41 did)."""
    return wait_for(
        f"the history item {last!r}",
        lambda: (items := history(st, target_id, digest)) and items[-1] == last and items,
    )


def promotion_status(st: LocalStack, image: str) -> PromotionStatus | None:
    promotion = state_of(st).promotions.get(image)
    return None if promotion is None else promotion.status


def patches(st: LocalStack, name: str) -> list[str | None]:
    """The content types of the PATCH requests the Rollout received."""
    return [
        r.content_type
        for r in kube(st).requests
        if r.method == "PATCH" and r.path.endswith(f"/rollouts/{name}")
    ]


def test_a_configured_and_a_labelled_rollout_are_pinned_and_verified_healthy(st, tmp_path):
    assert st.registry is not None
    image, (configured,) = follow(st, "demo/argo-web", "web")
    kube(st).create(rollout("web", "shop", "placeholder"))
    kube(st).create(rollout("api", "shop", image, labels=FOLLOW))  # discovered by its label
    discovered = "local/shop/Rollout/api/app"
    digest = push_image(st.registry.url, "demo/argo-web", "stable")
    report = st.run_reconciler()
    assert report["added"] >= 1 and report["clusters_skipped"] == 0, report
    for target in (configured, discovered):
        wait_for(f"{target} verified", lambda t=target: recorded(st, t, digest) is TargetStatus.VERIFIED)
        # (the reconcile's heal and its level check may both reach the consumer: "already-current",
        # which claims the target again and may be applied and verified after the wait above)
        entries = [h for h in reversed(state_of(st).history.of_target(target)) if h.digest == digest]
        steps = [h.status for h in entries]
        assert steps[0] == "applied" and set(steps) == {"applied", "verified"}, steps
        detail = next(h.detail for h in entries if h.status == "verified")
        assert detail is not None and detail.startswith("Healthy: ReplicaSet")
    for name in ("web", "api"):
        assert spec_image(st, name) == f"{image}@{digest}"
        obj = kube(st).get("Rollout", "shop", name)
        assert obj["status"]["phase"] == "Healthy" and obj["metadata"]["generation"] == 2
        assert obj["status"]["stableRS"] == obj["status"]["currentPodHash"]
        assert obj["status"]["observedGeneration"] == "2"
        assert pod_digests(st, name) == {digest}  # the stable Pods run the new digest
        assert json.loads(obj["spec"]["template"]["metadata"]["annotations"]["tagpin.dev/digests"]) == {
            "app": digest
        }
        # JSON patches only (two when both changes raced: the second got 409 and found it current);
        # generation 2: the spec changed once
        assert set(patches(st, name)) == {"application/json-patch+json"}

    # kubectl sees what tagpin wrote
    kubectl = require_binary("kubectl")
    config = kube(st).write_kubeconfig(tmp_path / "kubeconfig", context="local", identity=kube(st).admin)
    shown = subprocess.run(
        [
            kubectl,
            "--kubeconfig",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "get",
            "rollouts.argoproj.io",
            "-n",
            "shop",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.template.spec.containers[0].image} {end}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.split()
    assert f"api={image}@{digest}" in shown and f"web={image}@{digest}" in shown


def test_a_broken_image_degrades_the_rollout_and_tagpin_leaves_the_rollback_to_argo(st):
    assert st.registry is not None
    image, (target,) = follow(st, "demo/argo-shop", "shop")
    steps = [{"setWeight": 20}, {"setWeight": 60}]
    kube(st).create(rollout("shop", "shop", "placeholder", steps=steps, progress_deadline=DEADLINE_S))
    good = push_image(st.registry.url, "demo/argo-shop", "stable")
    st.run_poller()
    wait_for("the good digest verified", lambda: status(st, target, good) is TargetStatus.VERIFIED)

    bad = push_image(st.registry.url, "demo/argo-shop", "stable")
    kube(st).break_image(bad)
    st.run_poller()
    wait_for("failed", lambda: status(st, target, bad) is TargetStatus.FAILED)
    wait_for("the promotion halted", lambda: promotion_status(st, image) is PromotionStatus.HALTED)
    obj = kube(st).get("Rollout", "shop", "shop")
    assert obj["status"]["phase"] == "Degraded"
    detail = state_of(st).targets.get(target).detail  # type: ignore[union-attr]
    assert detail is not None and detail.startswith("Degraded: ProgressDeadlineExceeded")
    tag = state_of(st).tags.get(image)
    assert tag is not None and tag.digest == bad and tag.blocked and target in (tag.bad_reason or "")

    # tagpin did not patch the previous image back: Argo keeps its stable ReplicaSet (the good
    # digest's Pods) and aborts or rolls back itself.
    sent = len(patches(st, "shop"))
    time.sleep(2 * ROLLOUT_DELAY + 1)
    assert spec_image(st, "shop") == f"{image}@{bad}"
    assert pod_digests(st, "shop") == {good}
    assert recorded_trail(st, target, bad, "failed") == ["applied", "failed"]  # never rolled_back
    trail = [e for e in state_of(st).history.of_image(image) if e.digest == bad]
    assert "rolled_back" not in [e.event for e in trail]  # the image's trail says so too
    assert any(e.event == "failed" and "restored: none" in (e.detail or "") for e in trail)

    # Nothing brings the bad digest back or patches over Argo: the poller, the reconciler...
    st.run_poller()
    st.run_reconciler()
    time.sleep(2)
    assert len(patches(st, "shop")) == sent and spec_image(st, "shop") == f"{image}@{bad}"
    assert status(st, target, bad) is TargetStatus.FAILED

    # ...until the tag moves on: the fixed digest rolls as usual.
    fixed = push_image(st.registry.url, "demo/argo-shop", "stable")
    st.run_poller()
    wait_for("the fixed digest verified", lambda: status(st, target, fixed) is TargetStatus.VERIFIED)
    assert pod_digests(st, "shop") == {fixed}
    assert kube(st).get("Rollout", "shop", "shop")["status"]["phase"] == "Healthy"


def test_a_paused_canary_waits_past_the_timeout_and_completes_when_promoted(st):
    assert st.registry is not None
    timeout_s = 3
    _image, (target,) = follow(st, "demo/argo-cart", "cart", verify_timeout_seconds=timeout_s)
    kube(st).create(rollout("cart", "shop", "placeholder", steps=PAUSE_STEPS))
    digest = push_image(st.registry.url, "demo/argo-cart", "stable")
    st.run_poller()
    wait_for(
        "paused at its canary step",
        lambda: kube(st).get("Rollout", "shop", "cart")["status"]["phase"] == "Paused",
    )
    reads = kube(st).count("GET", "/rollouts/cart$")
    time.sleep(2 * timeout_s + 1)  # paused for longer than the verify timeout
    assert status(st, target, digest) is TargetStatus.APPLIED  # waiting, not failed
    assert kube(st).count("GET", "/rollouts/cart$") > reads  # tagpin kept looking meanwhile
    assert pod_digests(st, "cart") != {digest}  # Argo holds the stable Pods

    kube(st).promote_rollout("shop", "cart")  # a person (or the step's duration) moves it on
    wait_for("verified once promoted", lambda: status(st, target, digest) is TargetStatus.VERIFIED)
    assert recorded_trail(st, target, digest, "verified") == ["applied", "verified"]
    assert pod_digests(st, "cart") == {digest}
    assert kube(st).get("Rollout", "shop", "cart")["status"]["phase"] == "Healthy"


def test_a_pause_longer_than_the_maximum_is_stalled_and_no_longer_followed(st):
    """rollout.max_pause_seconds: the target is recorded stalled, nothing is rolled back or marked
    bad, and the consumer stops looking (the chain of verifications ends)."""
    assert st.registry is not None
    # The module's verify timeout (20 s), not a shorter one: a timeout of 1 s failed the rollout
    # whenever its canary pod took longer than that to reach the pause step (a busy machine). How
    # the looks thin out past the timeout is tests/unit/test_argo_pauses.py's.
    image, (target,) = follow(st, "demo/argo-pause", "pause", max_pause_seconds=4)
    kube(st).create(rollout("pause", "shop", "placeholder", steps=PAUSE_STEPS))
    digest = push_image(st.registry.url, "demo/argo-pause", "stable")
    st.run_poller()
    wait_for("stalled", lambda: status(st, target, digest) is TargetStatus.STALLED)
    detail = state_of(st).targets.get(target).detail  # type: ignore[union-attr]
    assert detail is not None and "longer than rollout.max_pause_seconds (4 s)" in detail
    assert recorded_trail(st, target, digest, "stalled") == ["applied", "stalled"]
    reads = kube(st).count("GET", "/rollouts/pause$")
    time.sleep(3)  # three verify intervals: a chain still running would have looked again
    assert kube(st).count("GET", "/rollouts/pause$") == reads
    assert spec_image(st, "pause").endswith("@" + digest)  # not patched back
    assert kube(st).get("Rollout", "shop", "pause")["status"]["phase"] == "Paused"
    tag = state_of(st).tags.get(image)
    assert tag is not None and not tag.blocked
    assert promotion_status(st, image) is PromotionStatus.ROLLING
