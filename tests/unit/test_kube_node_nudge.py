"""A kwok node that stays NotReady is nudged until kwok plays its Stages (tagpin_local.kube).

Under load kwok once left the node NotReady for 180 s (CI, stops 39 and 50): it held a stale empty
list of its Stages (see KubeletStages.touch), so it played none, and a label patched on the node
every 15 s changed nothing. The start-up now touches the node and kwok's Stages every few seconds.
The API server and kwok are stand-ins here: the node turns Ready only once the Stages were touched,
as kwok's cache does; the test is about the loop (the real behaviour was reproduced with a kwok
built to make that stale read, see the closing note of stop 51)."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin_local.kube import cluster as cluster_module
from tagpin_local.kube.cluster import KubeCluster
from tagpin_local.kube.procs import ProcessFailed


class FakeKwok:
    """The node is Ready only after kwok's Stages were touched ``needed`` times; the node's own
    label patches are recorded and change nothing (kwok without a Stage does not watch nodes)."""

    patches: list[dict[str, Any]] = []
    touches = 0
    needed = 1

    def __init__(self, _api: object = None) -> None:
        pass

    def read_node(self, name: str) -> Any:
        ready = "True" if FakeKwok.touches >= FakeKwok.needed else "False"
        condition = type("C", (), {"type": "Ready", "status": ready})()
        return type("N", (), {"status": type("S", (), {"conditions": [condition]})()})()

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        FakeKwok.patches.append(body)

    def touch(self) -> None:
        FakeKwok.touches += 1


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> KubeCluster:
    FakeKwok.patches, FakeKwok.touches = [], 0
    monkeypatch.setattr(cluster_module.client, "CoreV1Api", FakeKwok)
    cluster = KubeCluster("nudge-test")
    monkeypatch.setattr(cluster, "api_client", lambda *a, **k: object())
    cluster._kubelet = FakeKwok()  # type: ignore[assignment]
    return cluster


def test_a_node_not_ready_is_nudged_until_kwok_plays_its_stages(kube: KubeCluster) -> None:
    FakeKwok.needed = 2
    kube._wait_node_ready("kwok-node-0", timeout=5, nudge_every=0.2)
    assert FakeKwok.touches == 2
    assert [p["metadata"]["labels"]["tagpin-nudge"] for p in FakeKwok.patches] == ["1", "2"]


def test_a_node_never_ready_still_fails_at_the_deadline(kube: KubeCluster) -> None:
    FakeKwok.needed = 10**6
    with pytest.raises(ProcessFailed, match="node kwok-node-0 Ready not ready"):
        kube._wait_node_ready("kwok-node-0", timeout=0.5, nudge_every=0.2)
    assert 1 <= FakeKwok.touches <= 3
