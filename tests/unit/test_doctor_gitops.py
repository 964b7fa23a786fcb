"""`tagpin doctor`'s GitOps check reads the followed workloads side by side
(tagpin_cli.doctor_gitops): each cluster is asked first for one target (a cluster that is down is
asked once), then its other targets at once. The end-to-end test of what it reports is in
tests/e2e/test_cli_gitops.py; these prove the reading, with a connector whose reads wait on each
other (a barrier: read one after another, they would break it and be counted as a down cluster)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from tagpin import wiring
from tagpin.domain.config import parse_config
from tagpin.ports.workloads import NotFound, Unreachable, Workload
from tagpin_cli import doctor_gitops
from tagpin_cli.doctor_seat import Seat, Status

from tests.unit.test_doctor_aws import deployed

ARGO = {"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:demo/web"}
CONFIG = """
clusters:
  a: {eks: {name: a, region: eu-west-1}}
  b: {eks: {name: b, region: eu-west-1}}
  down: {eks: {name: down, region: eu-west-1}}
gitops:
  patch_live: [a/demo/Deployment/*, b/demo/Deployment/web1]
images:
  - image: 127.0.0.1:5000/demo/web:stable
    targets:
      - {cluster: a, namespace: demo, name: web1, container: app}
      - {cluster: down, namespace: demo, name: web1, container: app}
      - {cluster: a, namespace: demo, name: web2, container: app}
      - {cluster: b, namespace: demo, name: web1, container: app}
      - {cluster: down, namespace: demo, name: web2, container: app}
      - {cluster: a, namespace: demo, name: web3, container: app}
      - {cluster: a, namespace: demo, name: gone, container: app}
      - {cluster: down, namespace: demo, name: web3, container: app}
"""


class Cluster:
    def __init__(self, name: str, asked: Counter[str], wait: Callable[[str], None]) -> None:
        self.name, self.asked, self.wait = name, asked, wait

    def get(self, namespace: str, kind: Any, name: str) -> Workload:
        self.asked[self.name] += 1
        self.wait(name)
        if self.name == "down":
            raise Unreachable("cannot reach cluster 'down'")
        if name == "gone":
            raise NotFound(name)
        return Workload(resource_version="1", containers={"app": "x"}, annotations=ARGO)


def check(monkeypatch: pytest.MonkeyPatch, wait: Callable[[str], None]) -> tuple[list[Any], Counter[str]]:
    asked: Counter[str] = Counter()
    monkeypatch.setattr(wiring, "cluster_connector", lambda: lambda name: Cluster(name, asked, wait))
    config = parse_config(CONFIG)
    seat = Seat(deployed(), config=config, followed=list(config.images))
    return doctor_gitops.check_gitops(seat), asked


def test_each_cluster_is_asked_first_side_by_side_then_its_other_targets_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = threading.Barrier(3, timeout=10)  # the three clusters' first reads, together
    rest = threading.Barrier(3, timeout=10)  # a's other three targets, together

    def wait(name: str) -> None:
        (first if name in {"web1"} else rest).wait()

    results, asked = check(monkeypatch, wait)

    assert asked == {"a": 4, "b": 1, "down": 1}  # the cluster that is down: asked once
    assert [(r.subject, r.status) for r in results] == [
        ("a/demo/Deployment/web1/app", Status.OK),
        ("a/demo/Deployment/web2/app", Status.OK),
        ("b/demo/Deployment/web1/app", Status.OK),
        ("a/demo/Deployment/web3/app", Status.OK),
    ]  # in the configuration's order, whatever order the reads ended in
    assert all("managed by Argo CD Application shop" in r.detail for r in results)


def test_reads_one_after_another_would_not_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The barrier test above fails when the reads are serial: the check is what it proves."""
    monkeypatch.setattr(doctor_gitops, "READERS", 1)
    first = threading.Barrier(3, timeout=0.5)

    def wait(name: str) -> None:
        if name == "web1":
            first.wait()

    results, _ = check(monkeypatch, wait)
    assert [r.subject for r in results] == ["-"]  # every first read broke: no workload read
    assert "none of the 0 workload(s) read" in results[0].detail
