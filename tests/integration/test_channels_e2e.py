"""Version channels end to end: the real handlers on the local stack (the real registry with push
notifications into the webhook, moto, real Kubernetes control planes), the SQS loop running.

- a ``~1.4`` channel is pinned to ``1.4.1@<digest>`` among 1.4.0, 1.4.1, 1.5.0-rc.1 and 2.0.0, and a
  push of 1.4.2 rolls through the webhook alone, without a poll;
- stage takes every version, prod only the verified head: stage goes A -> B -> C -> D, only D is
  verified and promoted, prod goes A -> D;
- a version rolled back in stage is never chosen again by any channel of the repository, until a
  person clears it; a person can move a head down (recorded).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin import wiring
from tagpin.domain.config import FollowedImage
from tagpin.domain.messages import Trigger
from tagpin.domain.versions import Reason
from tagpin.ports.state import PromotionStatus, TargetStatus
from tagpin_cli import commands
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import running, state_of
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

ROLLOUT_DELAY = 0.4
WAVES: dict[str, Any] = {
    "verify_interval_seconds": 1,
    "verify_timeout_seconds": 20,
    # long enough that B and C arrive while the one before soaks in stage (under a second each)
    "soak_seconds": 6,
    "waves": [{"name": "stage", "clusters": ["stage"]}, {"name": "prod", "clusters": ["prod"]}],
}


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=True,
        poll_interval=None,
        consume=True,
        clusters=["stage", "prod"],
        rollout=WAVES,
        rollout_delay=ROLLOUT_DELAY,
    )
    with LocalStack(options) as stack:
        yield stack


def host(st: LocalStack) -> str:
    assert st.registry is not None
    return st.registry.host


def push(st: LocalStack, repository: str, tag: str) -> str:
    assert st.registry is not None
    return push_image(st.registry.url, repository, tag)


def channel(
    st: LocalStack, repository: str, policy: Any, workloads: list[tuple[str, str]], name: str | None = None
) -> tuple[str, list[str]]:
    """Create ``(cluster, workload)`` Deployments running ``repository:0.0.1`` and follow them as a
    version channel; returns its key and the target ids."""
    targets = []
    for cluster, workload in workloads:
        # a broken version fails by the deployment controller's progress deadline (600 s by default)
        st.kubes[cluster].create(
            deployment(workload, "apps", f"{host(st)}/{repository}:0.0.1", progress_deadline=10)
        )
        targets.append({"cluster": cluster, "namespace": "apps", "name": workload, "container": "app"})
    entry: dict[str, Any] = {"image": f"{host(st)}/{repository}", "policy": policy, "targets": targets}
    if name is not None:
        entry["channel"] = name
    st.options.images = [*st.options.images, entry]
    st.write_config()
    key = FollowedImage.model_validate(entry).image
    return key, [f"{c}/apps/Deployment/{w}/app" for c, w in workloads]


def status(st: LocalStack, target_id: str, digest: str) -> TargetStatus | None:
    target = state_of(st).targets.get(target_id)
    return target.status if target is not None and target.digest == digest else None


def digests_applied(st: LocalStack, target_id: str) -> list[str]:
    """The digests the target was moved to, oldest first (a promotion's later wave records the
    earlier wave's targets as applied again: counted once)."""
    found: list[str] = []
    for h in reversed(state_of(st).history.of_target(target_id)):
        if h.status == "applied" and (not found or found[-1] != h.digest):
            found.append(h.digest)
    return found


def test_a_channel_pins_the_newest_allowed_version_and_a_push_rolls_the_next(st: LocalStack) -> None:
    repository = "demo/versions"
    pushed = {tag: push(st, repository, tag) for tag in ("1.4.0", "1.4.1", "1.5.0-rc.1", "2.0.0")}
    key, (target,) = channel(st, repository, "~1.4", [("prod", "versions")])
    st.options.rollout = {**WAVES, "waves": [{"name": "all", "clusters": ["stage", "prod"]}]}
    st.write_config()
    st.run_poller()
    wait_for(
        "pinned to 1.4.1", lambda: running(st, target) == f"{host(st)}/{repository}:1.4.1@{pushed['1.4.1']}"
    )
    stored = state_of(st).tags.get(key)
    assert stored is not None and stored.version == "1.4.1"

    # the plan says why the newer tags were not chosen
    rows = [r for r in commands.plan() if r["image"] == key]
    assert rows and rows[0]["version"] == "1.4.1" and rows[0]["action"] == "none"
    reasons = dict(r.split(": ", 1) for r in rows[0]["rejected"])
    assert reasons == {"2.0.0": Reason.OUT_OF_RANGE, "1.5.0-rc.1": Reason.PRERELEASE}

    # a push of 1.4.2 rolls through the webhook alone (no poll runs here)
    started = time.monotonic()
    digest = push(st, repository, "1.4.2")
    wait_for("1.4.2 rolled", lambda: running(st, target) == f"{host(st)}/{repository}:1.4.2@{digest}")
    print(f"push of 1.4.2 -> patched in {time.monotonic() - started:.2f} s (webhook)")
    applied = state_of(st).targets.get(target)
    assert applied is not None and applied.trigger is Trigger.WEBHOOK
    # pushes the policy does not allow move nothing
    push(st, repository, "2.1.0")
    push(st, repository, "1.4.3-rc.1")
    st.run_poller()
    time.sleep(1)
    assert running(st, target).startswith(f"{host(st)}/{repository}:1.4.2@")


def test_stage_takes_every_version_prod_only_the_verified_head(st: LocalStack) -> None:
    repository = "demo/promoted"
    a = push(st, repository, "1.0.0")
    key, (stage, prod) = channel(
        st, repository, "^1", [("stage", "promoted"), ("prod", "promoted")], "stable"
    )
    st.options.rollout = WAVES
    st.write_config()
    st.run_poller()
    wait_for("A verified in prod", lambda: status(st, prod, a) is TargetStatus.VERIFIED)

    b = push(st, repository, "1.1.0")
    wait_for("B in stage", lambda: running(st, stage).endswith("@" + b))
    c = push(st, repository, "1.2.0")
    wait_for("C in stage", lambda: running(st, stage).endswith("@" + c))
    d = push(st, repository, "1.3.0")
    wait_for("D verified in prod", lambda: status(st, prod, d) is TargetStatus.VERIFIED)

    assert running(st, prod) == f"{host(st)}/{repository}:1.3.0@{d}"
    assert digests_applied(st, prod) == [a, d]  # prod went A -> D
    assert digests_applied(st, stage)[-3:] == [b, c, d]  # stage took every version
    wait_for("D's promotion complete", lambda: _promotion(st, key) is PromotionStatus.COMPLETE)
    trail = state_of(st).history.of_image(key)
    promoted = {e.digest for e in trail if e.event == "wave-started"}
    assert d in promoted and b not in promoted and c not in promoted


def _promotion(st: LocalStack, key: str) -> PromotionStatus | None:
    promotion = state_of(st).promotions.get(key)
    return None if promotion is None else promotion.status


def test_a_version_rolled_back_is_never_chosen_again_until_cleared(st: LocalStack) -> None:
    repository = "demo/guarded"
    good = push(st, repository, "2.0.0")
    key, (stage, prod) = channel(st, repository, "^2", [("stage", "guarded"), ("prod", "guarded")], "stable")
    st.options.rollout = WAVES
    st.write_config()
    st.run_poller()
    wait_for("2.0.0 verified in prod", lambda: status(st, prod, good) is TargetStatus.VERIFIED)

    for cluster in ("stage", "prod"):
        st.kubes[cluster].break_image(f"/{repository}:2.1.0@")
    bad = push(st, repository, "2.1.0")
    wait_for("2.1.0 rolled back in stage", lambda: status(st, stage, bad) is TargetStatus.ROLLED_BACK)
    assert running(st, stage).endswith("@" + good) and running(st, prod).endswith("@" + good)
    marked = state_of(st).versions.bad([f"{host(st)}/{repository}"])
    assert set(marked[f"{host(st)}/{repository}"]) == {"2.1.0"}

    # nothing brings it back: the poll, the reconciler, a second channel of the repository
    st.run_poller()
    st.run_reconciler()
    time.sleep(2)
    assert running(st, prod).endswith("@" + good) and digests_applied(st, prod).count(bad) == 0
    other, _ = channel(st, repository, "~2.1", [("prod", "patched")], "patch")
    head = wiring.channels().heads([wiring.followed()[other]])[other]
    assert head.tag is None and head.selection is not None
    rejected = {r.tag: r.reason for r in head.selection.rejected}
    assert rejected == {"2.1.0": Reason.BAD, "2.0.0": Reason.OUT_OF_RANGE}

    # a fixed version rolls as usual; a person moves the head down and clears the bad one
    fixed = push(st, repository, "2.2.0")
    wait_for("2.2.0 verified in prod", lambda: status(st, prod, fixed) is TargetStatus.VERIFIED)
    done = commands.downgrade(key, "2.0.0")
    assert done["held_back"] == ["2.2.0"]
    wait_for("prod back on 2.0.0", lambda: running(st, prod) == f"{host(st)}/{repository}:2.0.0@{good}")
    st.run_poller()
    time.sleep(1)
    assert running(st, prod).endswith("@" + good)  # held back: the poll does not move it up again
    assert [e.event for e in state_of(st).history.of_image(key) if e.event == "downgraded"] == ["downgraded"]
    assert commands.clear(key, "2.2.0")["cleared"] is True
    st.run_poller()
    wait_for("2.2.0 again after the clear", lambda: status(st, prod, fixed) is TargetStatus.VERIFIED)


def test_a_workload_annotated_with_a_policy_is_followed_as_a_channel(st: LocalStack) -> None:
    repository = "demo/annotated"
    pushed = {tag: push(st, repository, tag) for tag in ("3", "10", "9")}
    st.options.rollout = {**WAVES, "waves": [{"name": "all", "clusters": ["stage", "prod"]}]}
    st.write_config()
    workload = deployment(
        "annotated",
        "apps",
        f"{host(st)}/{repository}:3",
        container="app",
        labels={"tagpin.dev/follow": "true"},
    )
    workload["metadata"].setdefault("annotations", {})["tagpin.dev/policy"] = "numeric"
    st.kubes["prod"].create(workload)
    st.run_reconciler()
    key = f"{host(st)}/{repository}@numeric"
    assert key in wiring.followed()
    st.run_poller()
    target = "prod/apps/Deployment/annotated/app"
    wait_for(
        "pinned to build 10", lambda: running(st, target) == f"{host(st)}/{repository}:10@{pushed['10']}"
    )
