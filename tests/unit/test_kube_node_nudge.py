"""A kwok node that stays NotReady is touched until kwok looks at it again (tagpin_local.kube).

kwok acts on a node's watch events; under load it once left the node NotReady for 180 s (CI, stop
39). The start-up now patches a label on a node still NotReady every few seconds: a new event. The
API server is a stand-in here: the test is about the loop, not about kwok."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin_local.kube import cluster as cluster_module
from tagpin_local.kube.cluster import KubeCluster
from tagpin_local.kube.procs import ProcessFailed


class FakeCore:
    """Reports the node Ready only after it was patched ``needed`` times."""

    patches: list[dict[str, Any]] = []
    needed = 1

    def __init__(self, _api: object) -> None:
        pass

    def read_node(self, name: str) -> Any:
        ready = "True" if len(FakeCore.patches) >= FakeCore.needed else "False"
        condition = type("C", (), {"type": "Ready", "status": ready})()
        return type("N", (), {"status": type("S", (), {"conditions": [condition]})()})()

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        FakeCore.patches.append(body)


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> KubeCluster:
    FakeCore.patches = []
    monkeypatch.setattr(cluster_module.client, "CoreV1Api", FakeCore)
    cluster = KubeCluster("nudge-test")
    monkeypatch.setattr(cluster, "api_client", lambda *a, **k: object())
    return cluster


def test_a_node_not_ready_is_nudged_until_ready(kube: KubeCluster) -> None:
    FakeCore.needed = 2
    kube._wait_node_ready("kwok-node-0", timeout=5, nudge_every=0.2)
    assert [p["metadata"]["labels"]["tagpin-nudge"] for p in FakeCore.patches] == ["1", "2"]


def test_a_node_never_ready_still_fails_at_the_deadline(kube: KubeCluster) -> None:
    FakeCore.needed = 10**6
    with pytest.raises(ProcessFailed, match="node kwok-node-0 Ready not ready"):
        kube._wait_node_ready("kwok-node-0", timeout=0.5, nudge_every=0.2)
    assert 1 <= len(FakeCore.patches) <= 3
