"""Workload kinds as profiles (tagpin.domain.kinds): every kind is one profile, read the same way by
the adapter, the fakes and the use cases; a kind no profile describes is refused, never read with
another kind's rules."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from tagpin.adapters.kubernetes.workloads import workload_from
from tagpin.domain.config import Target
from tagpin.domain.kinds import PROFILES, ImageChange, Kind, PatchType, Progress, UnknownKind, profile_of
from tagpin.domain.refs import ImageRef
from tagpin.ports.workloads import Workload
from tagpin.usecases.running import running_digest

from tests.support.cluster import served

D1 = "sha256:" + "1" * 64


def test_the_kinds_are_the_profiles_in_their_order() -> None:
    builtin = ["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Rollout"]
    assert [k.value for k in Kind][: len(builtin)] == builtin  # a kind added later comes after them
    assert [p.kind for p in PROFILES] == [k.value for k in Kind]
    assert all(Kind(p.kind).profile is p and profile_of(p.kind) is p for p in PROFILES)
    assert Kind.ROLLOUT.custom and not any(k.custom for k in Kind if k.value in builtin[:4])


@pytest.mark.parametrize("name", ["Service", "deployment", "ReplicaSet", ""])
def test_an_unknown_kind_is_an_error_naming_the_known_ones(name: str) -> None:
    with pytest.raises(UnknownKind, match=r"unknown workload kind .*tagpin knows Deployment, .*Rollout"):
        profile_of(name)
    with pytest.raises(UnknownKind):  # the adapter reads nothing with another kind's rules
        workload_from(name, {"spec": {"template": {"spec": {"containers": []}}}})  # type: ignore[arg-type]


def test_the_configuration_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValidationError, match=r"Deployment.*Rollout"):
        Target(cluster="dev", kind="ReplicationController", name="web", container="app")  # type: ignore[arg-type]
    assert Target(cluster="dev", name="web", container="app").kind is Kind.DEPLOYMENT


def _served(kind: Kind, image: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """An object of ``kind`` as the API serves it: its pod template at its profile's path."""
    node: dict[str, Any] = {
        "metadata": {"annotations": {"tagpin.dev/digests": "{}"}},
        "spec": {"containers": [{"name": "app", "image": image}], "initContainers": []},
    }
    for step in reversed(kind.profile.template):
        node = {step: node}
    node["spec"]["selector"] = {"matchLabels": {"app": "web"}}
    node["spec"]["replicas"] = 1
    node["metadata"] = {"name": "web", "namespace": "shop", "resourceVersion": "7", "generation": 2}
    node["status"] = status or {}
    return node


@pytest.mark.parametrize("kind", list(Kind))
def test_each_profile_reads_and_writes_its_pod_template(kind: Kind) -> None:
    workload = workload_from(kind, _served(kind, "nginx:1.27"))
    assert workload.containers == {"app": "nginx:1.27"} and workload.resource_version == "7"
    assert workload.template_annotations == {"tagpin.dev/digests": "{}"}
    body = kind.profile.patch_body(ImageChange("7", "app", False, f"nginx:1.27@{D1}", {"a": "b"}))
    assert body["metadata"] == {"resourceVersion": "7"}
    written = workload_from(kind, body | {"metadata": {"resourceVersion": "8"}})  # the same path back
    assert written.containers == {"app": f"nginx:1.27@{D1}"}
    assert written.template_annotations == {"a": "b"}
    assert kind.profile.patch is (PatchType.JSON if kind.custom else PatchType.STRATEGIC_MERGE)


@pytest.mark.parametrize("kind", [k for k in Kind if k is not Kind.CRONJOB])
def test_health_waits_for_the_controller_of_every_rolling_kind(kind: Kind) -> None:
    workload = workload_from(kind, _served(kind, "nginx", {"observedGeneration": 1}))
    assert workload.health.progress is Progress.PROGRESSING
    assert "waiting for the controller (generation 2)" in workload.health.reason


def test_a_cronjob_has_no_rollout_and_no_pods_to_read() -> None:
    workload = workload_from(Kind.CRONJOB, _served(Kind.CRONJOB, "nginx:1.27"))
    assert workload.health.progress is Progress.COMPLETE and workload.selector is None
    assert not workload.runs_pods
    asked: list[str] = []
    found = running_digest(workload, "app", ImageRef.parse("nginx:1.27"), lambda: asked.append("pods") or [])
    assert found == (None, "unpinned CronJob") and asked == []  # pods are not even listed


def test_only_an_argo_rollout_with_steps_or_blue_green_rolls_itself_back() -> None:
    def rollout(strategy: dict[str, Any]) -> Workload:
        return workload_from(Kind.ROLLOUT, served(Kind.ROLLOUT, {"strategy": strategy}, {}))

    assert rollout({"blueGreen": {}}).manages_own_rollback
    assert rollout({"canary": {"steps": [{"setWeight": 20}]}}).manages_own_rollback
    assert not rollout({"canary": {}}).manages_own_rollback
    deployment = workload_from(Kind.DEPLOYMENT, served(Kind.DEPLOYMENT, {"strategy": {}}, {}))
    assert not deployment.manages_own_rollback
