"""Many clusters, every kind, reconcile: the real handlers (reconciler, poller, webhook, consumer)
against the real registry, a moto server and three Kubernetes control planes reached through
kubeconfigs in Secrets Manager. Workloads opt in by label only: the configuration names no target
of the images used here.

Clusters: "local" and "east" answer; "west" answers at first, then goes away.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin.ports.state import TargetStatus
from tagpin_cli import commands
from tagpin_local.kube.manifests import cronjob, daemonset, deployment, statefulset
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.constants import FOLLOW
from tests.support.stack import drain, state_of, wait_for

pytestmark = pytest.mark.integration


# Function-scoped: each test has its own stack and world, so that it stands alone in any order.
@pytest.fixture
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=False, poll_interval=None, consume=False, clusters=["east", "west"])
    with LocalStack(options) as stack:
        yield stack


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    if obj["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def image(st: LocalStack, cluster: str, kind: str, ns: str, name: str, container: str) -> str:
    spec = pod_spec(st.kubes[cluster].get(kind, ns, name))
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        if c["name"] == container:
            return str(c["image"])
    raise KeyError(container)


def reconcile(st: LocalStack) -> dict[str, Any]:
    result: dict[str, Any] = st.run_reconciler()
    return result


@pytest.fixture
def world(st: LocalStack) -> dict[str, Any]:
    """Labelled workloads of every kind over the three clusters, one reconcile, one drain."""
    reg = st.registry
    assert reg is not None
    app, side, tool = (f"{reg.host}/demo/{n}:stable" for n in ("app", "side", "tool"))
    digests = {
        "app": push_image(reg.url, "demo/app", "stable"),
        "side": push_image(reg.url, "demo/side", "stable"),
        "tool": push_image(reg.url, "demo/tool", "stable"),
    }
    local, east, west = st.kubes["local"], st.kubes["east"], st.kubes["west"]
    local.create(deployment("web", "shop", app, container="web", labels=FOLLOW))
    job = cronjob("nightly", "batch", tool, container="job", labels=FOLLOW)
    job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "migrate", "image": app}
    ]
    local.create(job)
    local.create(deployment("ignored", "shop", app, container="web"))  # not labelled
    paused = deployment("held", "shop", app, container="web", labels=FOLLOW)
    paused["metadata"]["annotations"] = {"tagpin.dev/paused": "true"}
    local.create(paused)
    two = deployment("api", "shop", app, container="api", labels=FOLLOW)
    two["spec"]["template"]["spec"]["containers"].append({"name": "proxy", "image": side})
    two["spec"]["template"]["spec"]["containers"].append({"name": "debug", "image": tool})
    two["metadata"]["annotations"] = {"tagpin.dev/containers": "api,proxy"}  # not "debug"
    east.create(two)
    east.create(statefulset("db", "data", side, container="db", labels=FOLLOW))
    east.create(daemonset("agent", "kube-system", tool, container="agent", labels=FOLLOW))
    west.create(deployment("edge", "shop", app, container="web", labels=FOLLOW))
    first = reconcile(st)
    drain(st)
    return {"app": app, "side": side, "tool": tool, "digests": digests, "first": first}


def test_first_reconcile_discovers_by_label_and_pins_every_kind(st, world):
    first, d = world["first"], world["digests"]
    assert first["clusters_skipped"] == 0, first
    assert first["added"] == 8, first  # web, nightly/job, nightly/migrate, api, proxy, db, agent, edge
    host = st.registry.host
    assert image(st, "local", "Deployment", "shop", "web", "web") == f"{host}/demo/app:stable@{d['app']}"
    assert image(st, "local", "CronJob", "batch", "nightly", "job") == f"{host}/demo/tool:stable@{d['tool']}"
    assert (
        image(st, "local", "CronJob", "batch", "nightly", "migrate") == f"{host}/demo/app:stable@{d['app']}"
    )
    assert image(st, "east", "Deployment", "shop", "api", "api") == f"{host}/demo/app:stable@{d['app']}"
    assert image(st, "east", "Deployment", "shop", "api", "proxy") == f"{host}/demo/side:stable@{d['side']}"
    assert image(st, "east", "Deployment", "shop", "api", "debug") == world["tool"]  # not chosen
    assert image(st, "east", "StatefulSet", "data", "db", "db") == f"{host}/demo/side:stable@{d['side']}"
    assert image(st, "east", "DaemonSet", "kube-system", "agent", "agent") == (
        f"{host}/demo/tool:stable@{d['tool']}"
    )
    assert image(st, "west", "Deployment", "shop", "edge", "web") == f"{host}/demo/app:stable@{d['app']}"
    # neither the unlabelled nor the paused workload was touched
    assert image(st, "local", "Deployment", "shop", "ignored", "web") == world["app"]
    assert image(st, "local", "Deployment", "shop", "held", "web") == world["app"]
    # the pod template records what tagpin did, per container
    notes = st.kubes["east"].get("Deployment", "shop", "api")["spec"]["template"]["metadata"]["annotations"]
    assert json.loads(notes["tagpin.dev/digests"]) == {"api": d["app"], "proxy": d["side"]}
    # the second run finds everything at its digest: nothing behind, nothing enqueued
    again = reconcile(st)
    assert again["behind"] == 0 and again["enqueued"] == 0 and again["added"] == 0, again


def test_unreachable_cluster_is_skipped_and_recorded_while_others_proceed(st, world):
    west = st.kubes["west"]
    west.set_down(True)
    try:
        d2 = push_image(st.registry.url, "demo/app", "stable")  # missed: no notification, no poll
        result = reconcile(st)
        assert result["clusters"]["west"]["ok"] is False
        assert "Unreachable" in result["clusters"]["west"]["error"]
        assert result["clusters"]["local"]["ok"] and result["clusters"]["east"]["ok"]
        recorded = state_of(st).clusters.get("west")
        assert recorded is not None and not recorded.ok and recorded.error
        # west's index entries are kept while it cannot be listed
        assert "west/shop/Deployment/edge/web" in {e.target_id for e in state_of(st).index.entries()}
        assert result["removed"] == 0
        st.kubes["west"].set_down(False)  # the consumer reaches it again
        drain(st)
        host = st.registry.host
        for cluster, kind, ns, name, container in [
            ("local", "Deployment", "shop", "web", "web"),
            ("local", "CronJob", "batch", "nightly", "migrate"),
            ("east", "Deployment", "shop", "api", "api"),
            ("west", "Deployment", "shop", "edge", "web"),
        ]:
            assert image(st, cluster, kind, ns, name, container) == f"{host}/demo/app:stable@{d2}"
    finally:
        west.set_down(False)
    assert state_of(st).clusters.get("west") is not None


def test_a_manual_edit_is_held_by_the_reconcile_until_released(st, world):
    """A person's edit after tagpin's patch is theirs (docs/trust.md): not patched back by the poll
    nor the reconcile (the target held, reported), until ``tagpin release`` rolls the tag again."""
    host = st.registry.host
    target = "east/data/StatefulSet/db/db"
    pinned = image(st, "east", "StatefulSet", "data", "db", "db")
    # someone puts the floating tag back by hand: pods now run whatever the node pulled (another
    # digest: kwok reports one of the reference), while tagpin's state still says "applied"
    st.kubes["east"].patch(
        "StatefulSet",
        "data",
        "db",
        {"spec": {"template": {"spec": {"containers": [{"name": "db", "image": world["side"]}]}}}},
    )
    assert st.run_poller()["enqueued"] == 0  # the state-level check cannot see a manual edit
    result = reconcile(st)
    assert result["held"] == 1 and target not in result["behind_targets"], result
    held = state_of(st).targets.get(target)
    assert held is not None and held.status is TargetStatus.HELD
    drain(st)
    assert image(st, "east", "StatefulSet", "data", "db", "db") == world["side"]  # not patched back
    assert reconcile(st)["enqueued"] == 0  # the next reconcile respects the hold too
    assert commands.release(target)["released"]
    drain(st)
    assert image(st, "east", "StatefulSet", "data", "db", "db") == pinned
    assert pinned.startswith(f"{host}/demo/side:stable@sha256:")


def test_unpinned_workload_already_running_the_digest_is_not_behind(st, world):
    """What runs is read from the pods' imageID (docker-pullable:// form) when the image field
    has no digest."""
    local = st.kubes["local"]
    digest = push_image(st.registry.url, "demo/fresh", "stable")
    fresh = f"{st.registry.host}/demo/fresh:stable"
    local.set_image_id(
        fresh, f"docker-pullable://{fresh.rsplit(':', 1)[0]}@{digest}"
    )  # what the kubelet pulled
    local.create(deployment("fresh", "shop", fresh, container="web", labels=FOLLOW))
    # Both replicas (a pod without its status yet makes what runs unknown: behind, rightly)
    wait_for(
        "both pods report their imageID",
        lambda: (
            sum(
                bool(p["status"].get("containerStatuses"))
                for p in local.pods_for("Deployment", "shop", "fresh")
            )
            == 2
        ),
    )
    result = reconcile(st)
    assert "local/shop/Deployment/fresh/web" not in result["behind_targets"], result
    assert result["added"] == 1


def test_deleted_and_unlabelled_workloads_are_dropped(st, world):
    east = st.kubes["east"]
    east.delete("DaemonSet", "kube-system", "agent")
    st.kubes["local"].patch(
        "CronJob", "batch", "nightly", {"metadata": {"labels": {"tagpin.dev/follow": None}}}
    )
    result = reconcile(st)
    removed = {
        "east/kube-system/DaemonSet/agent/agent",
        "local/batch/CronJob/nightly/job",
        "local/batch/CronJob/nightly/migrate",
    }
    assert removed <= set(result["removed_targets"]), result
    index = {e.target_id for e in state_of(st).index.entries()}
    assert not removed & index
    gone = state_of(st).targets.get("east/kube-system/DaemonSet/agent/agent")
    assert gone is not None and gone.status is TargetStatus.REMOVED
    assert (
        state_of(st).history.of_target("east/kube-system/DaemonSet/agent/agent", limit=1)[0].status
        == "removed"
    )
    # no longer followed: a new digest reaches the others but not the dropped ones
    before = image(st, "local", "CronJob", "batch", "nightly", "job")
    push_image(st.registry.url, "demo/tool", "stable")
    st.run_poller()
    drain(st)
    assert image(st, "local", "CronJob", "batch", "nightly", "job") == before


def test_newly_labelled_workload_follows_the_webhook_path_without_configuration(st, world):
    """Label, reconcile once (the index), then a push notification alone rolls it."""
    local = st.kubes["local"]
    local.create(deployment("late", "shop", world["side"], container="web", labels=FOLLOW))
    reconcile(st)
    drain(st)
    st.set_notifications(True)
    try:
        digest = push_image(st.registry.url, "demo/side", "stable")
        deadline = time.monotonic() + 20
        want = f"{st.registry.host}/demo/side:stable@{digest}"
        while time.monotonic() < deadline and image(st, "local", "Deployment", "shop", "late", "web") != want:
            st.consume_once(wait_s=1)
        assert image(st, "local", "Deployment", "shop", "late", "web") == want
    finally:
        st.set_notifications(False)
    drain(st)
    assert image(st, "east", "StatefulSet", "data", "db", "db") == want  # the same tag, another cluster
