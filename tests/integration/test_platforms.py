"""The platform gate end to end: the real handlers on the local stack, kwok's nodes in the clusters.
An image index without linux/arm64 is blocked for a cluster with arm64 nodes (recorded, announced
once, shown by plan) and applied in an amd64-only cluster; the index that adds arm64 rolls both.
A cluster whose nodes may be listed but where none exists (``bare``: its one node deleted) falls
back to its configured ``platforms``; where nodes exist they take precedence over the configuration (cluster
``amd`` is configured with ``linux/arm64`` only, its amd64 node decides)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from tagpin.ports.state import TargetStatus
from tagpin_cli import commands
from tagpin_local.kube.cluster import NODE_NAME
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import running, state_of
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

MIXED, AMD = "mixed/app/Deployment/app/app", "amd/app/Deployment/app/app"
BARE, AMD_BARE = "bare/app/Deployment/bare/app", "amd/app/Deployment/bare/app"


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=False, poll_interval=None, consume=True, clusters=["mixed", "amd", "bare"]
    )
    with LocalStack(options) as stack:
        assert stack.registry is not None
        # every cluster starts with one linux/amd64 node (kwok's)
        stack.kubes["mixed"].add_node("m2", "linux/arm64")
        stack.kubes["amd"].add_node("a1", "linux/amd64")
        stack.kubes["bare"].delete("Node", None, NODE_NAME)  # "bare" has no node: its pods stay Pending
        stack.options.images = []
        for repository, name, clusters in (
            ("multi", "app", ("mixed", "amd")),
            ("bare", "bare", ("bare", "amd")),
        ):
            image = f"{stack.registry.host}/demo/{repository}:stable"
            targets = []
            for cluster in clusters:
                stack.kubes[cluster].create(deployment(name, "app", image, container="app"))
                targets.append({"cluster": cluster, "namespace": "app", "name": name, "container": "app"})
            stack.options.images.append({"image": image, "targets": targets})
        document = stack.config_document()
        document["clusters"]["bare"]["platforms"] = ["linux/amd64", "linux/arm64"]
        document["clusters"]["amd"]["platforms"] = ["linux/arm64"]  # its node says amd64, and wins
        stack.write_config(document)
        yield stack


def test_an_index_without_arm64_is_blocked_where_arm64_nodes_run(st: LocalStack) -> None:
    assert st.registry is not None
    amd_only = push_image(st.registry.url, "demo/multi", "stable", platforms=["linux/amd64"])
    st.notifications()
    st.run_poller()
    wait_for("applied in the amd64-only cluster", lambda: running(st, AMD).endswith("@" + amd_only))
    wait_for(
        "recorded blocked in the mixed cluster",
        lambda: [h for h in state_of(st).history.of_target(MIXED) if h.status == "blocked"],
    )
    blocked = [h for h in state_of(st).history.of_target(MIXED) if h.status == "blocked"]
    assert "lacks linux/arm64, which the nodes of cluster mixed run" in (blocked[0].detail or "")
    assert not running(st, MIXED).endswith("@" + amd_only)
    st.run_poller()  # again: still blocked, recorded once
    time.sleep(1)
    assert len([h for h in state_of(st).history.of_target(MIXED) if h.status == "blocked"]) == 1
    assert [n["event"] for n in st.notifications() if n["event"] == "blocked"] == ["blocked"]
    plan = {r["target"]: r for r in commands.plan()}
    assert plan[MIXED]["action"] == "none" and "blocked: platform" in plan[MIXED]["detail"]

    both = push_image(st.registry.url, "demo/multi", "stable", platforms=["linux/amd64", "linux/arm64"])
    st.run_poller()
    wait_for("the mixed cluster rolls the index with arm64", lambda: running(st, MIXED).endswith("@" + both))
    wait_for("the amd64 cluster too", lambda: running(st, AMD).endswith("@" + both))
    mixed = state_of(st).targets.get(MIXED)
    assert mixed is not None and mixed.status in (TargetStatus.APPLIED, TargetStatus.VERIFIED)


def test_a_cluster_without_nodes_requires_its_configured_platforms(st: LocalStack) -> None:
    assert st.registry is not None
    amd_only = push_image(st.registry.url, "demo/bare", "stable", platforms=["linux/amd64"])
    st.run_poller()
    wait_for("applied where the node (amd64) decides", lambda: running(st, AMD_BARE).endswith("@" + amd_only))
    wait_for(
        "recorded blocked in the cluster without nodes",
        lambda: [h for h in state_of(st).history.of_target(BARE) if h.status == "blocked"],
    )
    blocked = [h for h in state_of(st).history.of_target(BARE) if h.status == "blocked"]
    assert "lacks linux/arm64, which the configuration of cluster bare runs" in (blocked[0].detail or "")
    assert not running(st, BARE).endswith("@" + amd_only)

    both = push_image(st.registry.url, "demo/bare", "stable", platforms=["linux/amd64", "linux/arm64"])
    st.run_poller()
    wait_for(
        "the cluster without nodes rolls the index with arm64", lambda: running(st, BARE).endswith("@" + both)
    )
    wait_for("the amd64 cluster too", lambda: running(st, AMD_BARE).endswith("@" + both))
