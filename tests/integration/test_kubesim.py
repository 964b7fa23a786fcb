"""The Kubernetes API simulator, driven through the official client and through kubectl."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from tagpin_local.kubesim import (
    KubeSim,
    Rule,
    cronjob,
    daemonset,
    deployment,
    json_patch,
    merge_patch,
    parse_selector,
    rollout,
    selector_matches,
    statefulset,
    strategic_merge,
)

pytestmark = pytest.mark.integration

TOKEN = "sim-token-123"
ARGO = ("argoproj.io", "v1alpha1")
DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


def web_manifest() -> dict:
    """web: an app container with env/ports/mounts plus a sidecar that must stay untouched."""
    d = deployment("web", "shop", "nginx:1.27", replicas=2, labels={"tier": "frontend"})
    pod = d["spec"]["template"]["spec"]
    pod["containers"][0].update(
        env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        ports=[{"containerPort": 80, "name": "http"}],
        volumeMounts=[{"name": "cfg", "mountPath": "/etc/cfg"}],
    )
    pod["containers"].append({"name": "sidecar", "image": "envoyproxy/envoy:v1.30"})
    pod["volumes"] = [{"name": "cfg", "emptyDir": {}}]
    return d


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(token=TOKEN) as s:
        s.create(web_manifest())
        s.create(statefulset("db", "shop", "postgres:16", replicas=2))
        s.create(daemonset("agent", "ops", "fluent/fluent-bit:3.0"))
        s.create(cronjob("report", "ops", "busybox:1.36"))
        yield s


def api_client(sim: KubeSim, token: str | None = TOKEN) -> client.ApiClient:
    auth = {"authorization": token, "BearerToken": token} if token else {}
    prefix = {"authorization": "Bearer", "BearerToken": "Bearer"} if token else {}
    cfg = client.Configuration(host=sim.url, api_key=auth, api_key_prefix=prefix)
    cfg.retries = 0
    return client.ApiClient(cfg)


@pytest.fixture
def apps(sim: KubeSim) -> client.AppsV1Api:
    return client.AppsV1Api(api_client(sim))


@pytest.fixture
def core(sim: KubeSim) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(sim))


def image_patch(image: str, container: str = "app") -> dict:
    """The strategic merge patch tagpin sends: one container's image."""
    return {"spec": {"template": {"spec": {"containers": [{"name": container, "image": image}]}}}}


def containers(obj: dict) -> dict[str, dict]:
    return {c["name"]: c for c in obj["spec"]["template"]["spec"]["containers"]}


# ------------------------------------------------------------------------------------------ client


def test_read_returns_complete_objects_the_client_accepts(sim: KubeSim, apps: client.AppsV1Api) -> None:
    dep = apps.read_namespaced_deployment("web", "shop")
    assert isinstance(dep, client.V1Deployment)
    assert dep.spec.strategy.type == "RollingUpdate"
    assert dep.spec.strategy.rolling_update.max_surge == "25%"
    assert (dep.spec.revision_history_limit, dep.spec.progress_deadline_seconds) == (10, 600)
    pod = dep.spec.template.spec
    assert (pod.restart_policy, pod.dns_policy, pod.scheduler_name) == (
        "Always",
        "ClusterFirst",
        "default-scheduler",
    )
    assert pod.termination_grace_period_seconds == 30
    app = pod.containers[0]
    assert (app.image_pull_policy, app.termination_message_path) == ("IfNotPresent", "/dev/termination-log")
    assert app.ports[0].protocol == "TCP"
    assert dep.status.observed_generation == dep.metadata.generation == 1
    assert (dep.status.replicas, dep.status.ready_replicas, dep.status.available_replicas) == (2, 2, 2)
    progressing = next(c for c in dep.status.conditions if c.type == "Progressing")
    assert progressing.reason == "NewReplicaSetAvailable"

    sts = apps.read_namespaced_stateful_set("db", "shop")
    assert sts.status.ready_replicas == 2 and sts.status.current_revision == sts.status.update_revision
    ds = apps.read_namespaced_daemon_set("agent", "ops")
    assert ds.status.number_ready == ds.status.desired_number_scheduled == 1
    cj = client.BatchV1Api(apps.api_client).read_namespaced_cron_job("report", "ops")
    assert cj.spec.job_template.spec.template.spec.restart_policy == "OnFailure"
    assert cj.spec.concurrency_policy == "Allow"
    ns = client.CoreV1Api(apps.api_client).read_namespace("shop")
    assert ns.status.phase == "Active"


def test_pods_carry_the_running_digest(sim: KubeSim, core: client.CoreV1Api) -> None:
    pods = core.list_namespaced_pod("shop", label_selector="app=web").items
    assert len(pods) == 2
    for pod in pods:
        assert pod.metadata.name.startswith("web-")
        assert pod.metadata.owner_references[0].kind == "ReplicaSet"
        statuses = {s.name: s for s in pod.status.container_statuses}
        assert statuses["app"].image_id.startswith("nginx@sha256:")
        assert statuses["sidecar"].image_id.startswith("envoyproxy/envoy@sha256:")
    db = core.read_namespaced_pod("db-1", "shop")
    assert db.status.phase == "Running" and db.metadata.owner_references[0].kind == "StatefulSet"


def test_strategic_merge_patch_merges_containers_by_name(sim: KubeSim, apps: client.AppsV1Api) -> None:
    before = sim.get("Deployment", "shop", "web")
    old_pods = {p["metadata"]["name"] for p in sim.pods_for("Deployment", "shop", "web")}
    sim.clear_requests()
    patch = {
        "metadata": {"annotations": {"tagpin.dev/pinned": "nginx:1.27"}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "image": f"nginx:1.27@{DIGEST}", "env": [{"name": "C", "value": "3"}]}
                    ]
                }
            }
        },
    }
    out = apps.patch_namespaced_deployment("web", "shop", patch)
    assert sim.requests == [
        ("PATCH", "/apis/apps/v1/namespaces/shop/deployments/web", "application/strategic-merge-patch+json")
    ]
    assert out.spec.template.spec.containers[0].image == f"nginx:1.27@{DIGEST}"

    after = sim.get("Deployment", "shop", "web")
    got = containers(after)
    assert got["app"]["image"] == f"nginx:1.27@{DIGEST}"
    assert [e["name"] for e in got["app"]["env"]] == ["A", "B", "C"]  # env merged by name
    assert got["app"]["volumeMounts"] == containers(before)["app"]["volumeMounts"]
    assert got["sidecar"] == containers(before)["sidecar"]  # the other container is untouched
    assert after["metadata"]["annotations"] == {
        "tagpin.dev/pinned": "nginx:1.27",
        "deployment.kubernetes.io/revision": "2",
    }
    assert after["metadata"]["labels"] == {"tier": "frontend"}
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert after["metadata"]["generation"] == 2
    assert after["status"]["observedGeneration"] == 2
    assert after["status"]["updatedReplicas"] == 2

    pods = sim.pods_for("Deployment", "shop", "web")
    assert len(pods) == 2 and not old_pods & {p["metadata"]["name"] for p in pods}
    for pod in pods:
        app = next(s for s in pod["status"]["containerStatuses"] if s["name"] == "app")
        assert app["imageID"] == f"nginx@{DIGEST}"


def test_metadata_only_patch_keeps_generation_and_pods(sim: KubeSim, apps: client.AppsV1Api) -> None:
    pods = sim.pods_for("Deployment", "shop", "web")
    apps.patch_namespaced_deployment("web", "shop", {"metadata": {"labels": {"tagpin.dev/follow": "true"}}})
    after = sim.get("Deployment", "shop", "web")
    assert after["metadata"]["generation"] == 1
    assert after["metadata"]["labels"] == {"tier": "frontend", "tagpin.dev/follow": "true"}
    assert sim.pods_for("Deployment", "shop", "web") == pods
    # the same patch again is a no-op: the resourceVersion stays
    rv = after["metadata"]["resourceVersion"]
    apps.patch_namespaced_deployment("web", "shop", {"metadata": {"labels": {"tagpin.dev/follow": "true"}}})
    assert sim.get("Deployment", "shop", "web")["metadata"]["resourceVersion"] == rv


def test_merge_patch_replaces_lists_and_null_deletes(sim: KubeSim, apps: client.AppsV1Api) -> None:
    patch = {
        "metadata": {"labels": {"tier": None, "team": "a"}},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.28"}]}}},
    }
    apps.patch_namespaced_deployment("web", "shop", patch, _content_type="application/merge-patch+json")
    assert sim.requests[-1].content_type == "application/merge-patch+json"
    after = sim.get("Deployment", "shop", "web")
    assert after["metadata"]["labels"] == {"team": "a"}
    assert list(containers(after)) == ["app"]  # RFC 7386 replaces the whole list
    assert containers(after)["app"]["imagePullPolicy"] == "IfNotPresent"  # defaults filled again


def test_json_patch_with_test_operation(sim: KubeSim, apps: client.AppsV1Api) -> None:
    path = "/spec/template/spec/containers/0/image"
    ops = [
        {"op": "test", "path": path, "value": "nginx:1.27"},
        {"op": "replace", "path": path, "value": "nginx:1.29"},
    ]
    apps.patch_namespaced_deployment("web", "shop", ops)
    assert sim.requests[-1].content_type == "application/json-patch+json"
    assert containers(sim.get("Deployment", "shop", "web"))["app"]["image"] == "nginx:1.29"
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("web", "shop", ops)  # the test op now fails
    assert err.value.status == 422
    assert containers(sim.get("Deployment", "shop", "web"))["app"]["image"] == "nginx:1.29"


def test_stale_resource_version_is_a_conflict(sim: KubeSim, apps: client.AppsV1Api) -> None:
    rv = sim.get("Deployment", "shop", "web")["metadata"]["resourceVersion"]
    apps.patch_namespaced_deployment(
        "web", "shop", {"metadata": {"resourceVersion": rv, "labels": {"x": "1"}}}
    )
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment(
            "web", "shop", {"metadata": {"resourceVersion": rv, "labels": {"x": "2"}}}
        )
    assert err.value.status == 409
    body = json.loads(err.value.body)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Conflict", 409)
    assert sim.get("Deployment", "shop", "web")["metadata"]["labels"]["x"] == "1"

    current = apps.read_namespaced_deployment("web", "shop")
    current.metadata.labels["x"] = "3"
    replaced = apps.replace_namespaced_deployment("web", "shop", current)  # PUT with the current rv works
    assert replaced.metadata.labels["x"] == "3"
    with pytest.raises(ApiException) as err:
        apps.replace_namespaced_deployment("web", "shop", current)  # ...and is stale afterwards
    assert err.value.status == 409


def test_concurrent_writer_makes_the_precondition_stale(sim: KubeSim, apps: client.AppsV1Api) -> None:
    """The read-modify-patch loop tagpin runs: another writer sneaks in between read and patch."""
    rv = apps.read_namespaced_deployment("web", "shop").metadata.resource_version
    other = sim.inject(
        "PATCH",
        "/deployments/web$",
        status=None,
        action=lambda: sim.patch("Deployment", "shop", "web", {"metadata": {"labels": {"other": "writer"}}}),
    )
    body = image_patch(f"nginx:1.27@{DIGEST}") | {"metadata": {"resourceVersion": rv}}
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("web", "shop", body)
    assert err.value.status == 409 and other.hits == 1
    fresh = apps.read_namespaced_deployment("web", "shop").metadata.resource_version
    body["metadata"]["resourceVersion"] = fresh
    apps.patch_namespaced_deployment("web", "shop", body, field_manager="tagpin")
    after = sim.get("Deployment", "shop", "web")
    assert after["metadata"]["labels"]["other"] == "writer"
    assert containers(after)["app"]["image"] == f"nginx:1.27@{DIGEST}"


def test_not_found_is_a_status_object(apps: client.AppsV1Api) -> None:
    with pytest.raises(ApiException) as err:
        apps.read_namespaced_deployment("nope", "shop")
    assert err.value.status == 404
    body = json.loads(err.value.body)
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'deployments.apps "nope" not found',
        "reason": "NotFound",
        "code": 404,
        "details": {"name": "nope", "group": "apps", "kind": "deployments"},
    }
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("nope", "shop", {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == 404


def test_token_is_required_and_sent(sim: KubeSim) -> None:
    with pytest.raises(ApiException) as err:
        client.AppsV1Api(api_client(sim, token=None)).list_deployment_for_all_namespaces()
    assert err.value.status == 401
    assert json.loads(err.value.body)["reason"] == "Unauthorized"
    with pytest.raises(ApiException) as err:
        client.AppsV1Api(api_client(sim, token="wrong")).list_deployment_for_all_namespaces()
    assert err.value.status == 401
    assert client.AppsV1Api(api_client(sim)).list_deployment_for_all_namespaces().items


def test_label_selectors_and_paging(sim: KubeSim, apps: client.AppsV1Api) -> None:
    for i, (follow, team) in enumerate([("true", "a"), ("true", "b"), ("false", "a"), (None, "c")]):
        labels = {"team": team} | ({"tagpin.dev/follow": follow} if follow else {})
        sim.create(deployment(f"d{i}", "apps" if i % 2 else "shop", "busybox:1", labels=labels))

    def names(selector: str) -> list[str]:
        items = apps.list_deployment_for_all_namespaces(label_selector=selector).items
        return sorted(d.metadata.name for d in items)

    assert names("tagpin.dev/follow=true") == ["d0", "d1"]
    assert names("tagpin.dev/follow==true,team=a") == ["d0"]
    assert names("tagpin.dev/follow!=true") == ["d2", "d3", "web"]
    assert names("tagpin.dev/follow") == ["d0", "d1", "d2"]
    assert names("!tagpin.dev/follow") == ["d3", "web"]
    assert names("team in (a, c)") == ["d0", "d2", "d3"]
    assert names("team notin (a),tier!=frontend") == ["d1", "d3"]
    assert [d.metadata.name for d in apps.list_namespaced_deployment("apps").items] == ["d1", "d3"]
    with pytest.raises(ApiException) as err:
        apps.list_deployment_for_all_namespaces(label_selector="a in b")
    assert err.value.status == 400

    seen, token, pages = [], None, 0
    while True:
        page = apps.list_deployment_for_all_namespaces(limit=2, _continue=token)
        pages += 1
        seen += [(d.metadata.namespace, d.metadata.name) for d in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 5 - len(seen)
    assert pages == 3
    assert seen == sorted(seen) and len(set(seen)) == 5


def test_create_delete_and_errors_through_the_client(sim: KubeSim, apps: client.AppsV1Api) -> None:
    made = apps.create_namespaced_deployment("shop", deployment("api", "shop", "ghcr.io/acme/api:2"))
    assert made.metadata.resource_version and made.spec.template.spec.dns_policy == "ClusterFirst"
    assert len(sim.pods_for("Deployment", "shop", "api")) == 2
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment("shop", deployment("api", "shop", "ghcr.io/acme/api:2"))
    assert (err.value.status, json.loads(err.value.body)["reason"]) == (409, "AlreadyExists")
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment("missing", deployment("api", "missing", "x:1"))
    assert err.value.status == 404
    bad = deployment("bad", "shop", "x:1")
    bad["spec"]["selector"]["matchLabels"] = {"app": "other"}
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment("shop", bad)
    assert (err.value.status, json.loads(err.value.body)["reason"]) == (422, "Invalid")

    status = apps.delete_namespaced_deployment("api", "shop")
    assert status["status"] == "Success"
    assert sim.pods_for("Deployment", "shop", "api") == []
    assert not [p for p in sim.list("Pod", "shop") if p["metadata"]["name"].startswith("api-")]


def test_image_id_resolver_and_other_workloads_roll(sim: KubeSim, apps: client.AppsV1Api) -> None:
    sim.image_id_for = lambda image: OTHER if image == "postgres:17" else None
    patch = image_patch("postgres:17")
    sts = apps.patch_namespaced_stateful_set("db", "shop", patch)
    assert sts.metadata.generation == 2 and sts.status.observed_generation == 2
    pods = sim.pods_for("StatefulSet", "shop", "db")
    assert [p["metadata"]["name"] for p in pods] == ["db-0", "db-1"]
    assert {p["status"]["containerStatuses"][0]["imageID"] for p in pods} == {f"postgres@{OTHER}"}

    patch["spec"]["template"]["spec"]["containers"][0]["image"] = "fluent/fluent-bit:3.1"
    apps.patch_namespaced_daemon_set("agent", "ops", patch)
    (pod,) = sim.pods_for("DaemonSet", "ops", "agent")
    assert pod["status"]["containerStatuses"][0]["image"] == "fluent/fluent-bit:3.1"
    assert pod["status"]["containerStatuses"][0]["imageID"].startswith("fluent/fluent-bit@sha256:")

    batch = client.BatchV1Api(apps.api_client)
    cj = {
        "spec": {
            "jobTemplate": {
                "spec": {
                    "template": {"spec": {"containers": [{"name": "job", "image": f"busybox:1.36@{DIGEST}"}]}}
                }
            }
        }
    }
    out = batch.patch_namespaced_cron_job("report", "ops", cj)
    assert out.spec.job_template.spec.template.spec.containers[0].image == f"busybox:1.36@{DIGEST}"
    assert out.metadata.generation == 2


def test_delayed_rollout_reports_progress_then_completes() -> None:
    with KubeSim(token=TOKEN, rollout_delay=0.3) as sim:
        sim.create(deployment("web", "shop", "nginx:1.27"))
        time.sleep(0.4)
        apps = client.AppsV1Api(api_client(sim))
        apps.patch_namespaced_deployment("web", "shop", image_patch(f"nginx@{DIGEST}"))
        mid = apps.read_namespaced_deployment("web", "shop")
        assert mid.status.observed_generation == 2 and mid.status.updated_replicas == 0
        assert next(c for c in mid.status.conditions if c.type == "Progressing").reason == "ReplicaSetUpdated"
        assert all(
            p["spec"]["containers"][0]["image"] == "nginx:1.27"
            for p in sim.pods_for("Deployment", "shop", "web")
        )
        deadline = time.monotonic() + 3
        while apps.read_namespaced_deployment("web", "shop").status.updated_replicas != 2:
            assert time.monotonic() < deadline, "rollout never finished"
            time.sleep(0.05)
        done = apps.read_namespaced_deployment("web", "shop")
        assert int(done.metadata.resource_version) > int(mid.metadata.resource_version)
        assert (
            next(c for c in done.status.conditions if c.type == "Progressing").reason
            == "NewReplicaSetAvailable"
        )
        assert all(
            p["status"]["containerStatuses"][0]["imageID"] == f"nginx@{DIGEST}"
            for p in sim.pods_for("Deployment", "shop", "web")
        )


def test_failed_rollout_keeps_old_pods(sim: KubeSim, apps: client.AppsV1Api) -> None:
    sim.fail_rollouts = True
    before = sim.pods_for("Deployment", "shop", "web")
    apps.patch_namespaced_deployment("web", "shop", image_patch("nginx:404"))
    dep = apps.read_namespaced_deployment("web", "shop")
    progressing = next(c for c in dep.status.conditions if c.type == "Progressing")
    assert (progressing.status, progressing.reason) == ("False", "ProgressDeadlineExceeded")
    assert sim.pods_for("Deployment", "shop", "web") == before


def test_fault_injection_and_outage(sim: KubeSim, apps: client.AppsV1Api) -> None:
    fault = sim.inject("PATCH", r"/deployments/web$", status=500, times=1)
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("web", "shop", {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == 500 and fault.hits == 1
    apps.patch_namespaced_deployment("web", "shop", {"metadata": {"labels": {"a": "b"}}})  # only once
    assert sim.count("PATCH", "/deployments/web$") == 2

    sim.inject("GET", "/deployments$", status=None, delay=1.0, times=None)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError):
        apps.list_deployment_for_all_namespaces(_request_timeout=0.2)
    assert time.monotonic() - started < 0.9
    sim.clear_faults()

    sim.set_down(True)
    with pytest.raises(urllib3.exceptions.HTTPError):
        apps.read_namespaced_deployment("web", "shop")
    sim.set_down(True, mode="503")
    with pytest.raises(ApiException) as err:
        apps.read_namespaced_deployment("web", "shop")
    assert err.value.status == 503
    sim.set_down(False)
    assert apps.read_namespaced_deployment("web", "shop").metadata.name == "web"


def test_dry_run_does_not_store(sim: KubeSim, apps: client.AppsV1Api) -> None:
    rv = sim.get("Deployment", "shop", "web")["metadata"]["resourceVersion"]
    out = apps.patch_namespaced_deployment(
        "web", "shop", {"metadata": {"labels": {"dry": "yes"}}}, dry_run="All"
    )
    assert out.metadata.labels["dry"] == "yes"
    stored = sim.get("Deployment", "shop", "web")
    assert "dry" not in stored["metadata"]["labels"] and stored["metadata"]["resourceVersion"] == rv


def test_kubeconfig_loads_into_the_client(sim: KubeSim, tmp_path: Path) -> None:
    from kubernetes import config

    path = sim.write_kubeconfig(tmp_path / "kubeconfig")
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    names = [
        d.metadata.name
        for d in client.AppsV1Api(client.ApiClient(cfg)).list_namespaced_deployment("shop").items
    ]
    assert names == ["web"]


# ---------------------------------------------------------------------------------- Argo Rollouts


@pytest.fixture
def custom(sim: KubeSim) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client(sim))


def test_rollouts_are_served_through_the_custom_objects_api(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    made = custom.create_namespaced_custom_object(
        *ARGO, "shop", "rollouts", rollout("web", "shop", "nginx:1.27", labels={"tagpin.dev/follow": "true"})
    )
    assert sim.requests[-1][:2] == ("POST", "/apis/argoproj.io/v1alpha1/namespaces/shop/rollouts")
    assert (made["kind"], made["apiVersion"], made["metadata"]["generation"]) == (
        "Rollout",
        "argoproj.io/v1alpha1",
        1,
    )
    assert "imagePullPolicy" not in containers(made)["app"]  # a custom resource gets no pod defaults
    custom.create_namespaced_custom_object(*ARGO, "ops", "rollouts", rollout("tool", "ops", "busybox:1"))

    got = custom.get_namespaced_custom_object(*ARGO, "shop", "rollouts", "web")
    assert containers(got)["app"]["image"] == "nginx:1.27"
    status = got["status"]
    assert (status["phase"], status["observedGeneration"]) == ("Healthy", "1")  # a string, as Argo writes it
    assert status["stableRS"] == status["currentPodHash"] and status["availableReplicas"] == 2
    pods = sim.pods_for("Rollout", "shop", "web")
    assert len(pods) == 2 and {p["metadata"]["labels"]["rollouts-pod-template-hash"] for p in pods} == {
        status["currentPodHash"]
    }

    listed = custom.list_cluster_custom_object(*ARGO, "rollouts", label_selector="tagpin.dev/follow=true")
    assert (listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == ("RolloutList", ["web"])
    assert sim.requests[-1].path == "/apis/argoproj.io/v1alpha1/rollouts"
    page = custom.list_cluster_custom_object(*ARGO, "rollouts", limit=1)
    assert len(page["items"]) == 1 and page["metadata"]["continue"]
    assert [
        i["metadata"]["name"] for i in custom.list_namespaced_custom_object(*ARGO, "ops", "rollouts")["items"]
    ] == ["tool"]

    with pytest.raises(ApiException) as err:
        custom.get_namespaced_custom_object(*ARGO, "shop", "rollouts", "nope")
    assert err.value.status == 404
    assert json.loads(err.value.body)["message"] == 'rollouts.argoproj.io "nope" not found'
    assert custom.delete_namespaced_custom_object(*ARGO, "ops", "rollouts", "tool")["status"] == "Success"
    assert sim.pods_for("Rollout", "ops", "tool") == []


def test_a_rollout_is_patched_by_json_patch_or_merge_patch_never_strategic_merge(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    manifest = rollout("web", "shop", "nginx:1.27")
    manifest["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "envoy:1.30"})
    sim.create(manifest)
    rv = sim.get("Rollout", "shop", "web")["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as err:  # refused, as a real API server refuses it for any CR
        custom.patch_namespaced_custom_object(
            *ARGO,
            "shop",
            "rollouts",
            "web",
            image_patch("nginx:1.28", "sidecar"),
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415 and "application/json-patch+json" in json.loads(err.value.body)["message"]

    # What tagpin sends: a JSON patch addressed by index, guarded by a test of the container's name,
    # with the resourceVersion it read as the precondition.
    ops = [
        {"op": "test", "path": "/spec/template/spec/containers/1/name", "value": "sidecar"},
        {"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": f"envoy:1.30@{DIGEST}"},
        {"op": "add", "path": "/spec/template/metadata/annotations", "value": {"tagpin.dev/trigger": "poll"}},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": rv},
    ]
    sim.clear_requests()
    out = custom.patch_namespaced_custom_object(
        *ARGO,
        "shop",
        "rollouts",
        "web",
        ops,
        field_manager="tagpin",
        _content_type="application/json-patch+json",
    )
    assert sim.requests == [
        ("PATCH", "/apis/argoproj.io/v1alpha1/namespaces/shop/rollouts/web", "application/json-patch+json")
    ]
    assert containers(out) == {
        "app": {"name": "app", "image": "nginx:1.27"},
        "sidecar": {"name": "sidecar", "image": f"envoy:1.30@{DIGEST}"},
    }
    assert out["spec"]["template"]["metadata"]["annotations"] == {"tagpin.dev/trigger": "poll"}
    assert out["metadata"]["generation"] == 2 and out["status"]["observedGeneration"] == "2"
    with pytest.raises(ApiException) as err:  # the same resourceVersion again: stale
        custom.patch_namespaced_custom_object(
            *ARGO, "shop", "rollouts", "web", ops, _content_type="application/json-patch+json"
        )
    assert (err.value.status, json.loads(err.value.body)["reason"]) == (409, "Conflict")
    ops[0]["value"] = "app"
    with pytest.raises(ApiException) as err:  # the index does not name that container
        custom.patch_namespaced_custom_object(
            *ARGO, "shop", "rollouts", "web", ops, _content_type="application/json-patch+json"
        )
    assert err.value.status == 422

    # A dict body goes as a JSON merge patch (the client's default for custom objects); a change
    # outside the spec keeps the generation.
    custom.patch_namespaced_custom_object(
        *ARGO, "shop", "rollouts", "web", {"metadata": {"labels": {"a": "b"}}}
    )
    assert sim.requests[-1].content_type == "application/merge-patch+json"
    after = sim.get("Rollout", "shop", "web")
    assert after["metadata"]["labels"] == {"a": "b"} and after["metadata"]["generation"] == 2


def test_rollout_phases_progressing_healthy_degraded_and_a_paused_canary() -> None:
    with KubeSim(token=TOKEN, rollout_delay=0.3) as sim:
        sim.create(
            rollout("web", "shop", "nginx:1.27", steps=[{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}])
        )
        custom = client.CustomObjectsApi(api_client(sim))

        def status() -> dict:
            return custom.get_namespaced_custom_object(*ARGO, "shop", "rollouts", "web")["status"]

        def wait_for(phase: str) -> dict:
            deadline = time.monotonic() + 3
            while (found := status())["phase"] != phase:
                assert time.monotonic() < deadline, f"never {phase}: {found}"
                time.sleep(0.05)
            return found

        stable = wait_for("Healthy")["stableRS"]  # the first rollout skips the steps

        def set_image(image: str) -> None:
            path = "/spec/template/spec/containers/0/image"
            ops = [{"op": "replace", "path": path, "value": image}]
            custom.patch_namespaced_custom_object(
                *ARGO, "shop", "rollouts", "web", ops, _content_type="application/json-patch+json"
            )

        set_image(f"nginx@{DIGEST}")
        mid = status()
        assert (mid["phase"], mid["observedGeneration"], mid["stableRS"]) == ("Progressing", "2", stable)
        assert mid["currentPodHash"] != stable
        paused = wait_for("Paused")  # at the pause step, until promoted
        assert (paused["currentStepIndex"], paused["pauseConditions"][0]["reason"]) == (1, "CanaryPauseStep")
        time.sleep(0.5)
        assert status()["phase"] == "Paused" and status()["stableRS"] == stable
        assert all(
            p["metadata"]["labels"]["rollouts-pod-template-hash"] == stable
            for p in sim.pods_for("Rollout", "shop", "web")
        )
        # what `kubectl argo rollouts promote` does: clear the pause conditions on the status subresource
        custom.patch_namespaced_custom_object_status(
            *ARGO, "shop", "rollouts", "web", {"status": {"pauseConditions": None}}
        )
        assert status()["phase"] == "Progressing"
        done = wait_for("Healthy")
        assert done["stableRS"] == done["currentPodHash"] == paused["currentPodHash"]
        assert done["currentStepIndex"] == 3 and "pauseConditions" not in done
        assert {
            p["status"]["containerStatuses"][0]["imageID"] for p in sim.pods_for("Rollout", "shop", "web")
        } == {f"nginx@{DIGEST}"}

        before = sim.pods_for("Rollout", "shop", "web")
        sim.break_image(OTHER)
        set_image(f"nginx@{OTHER}")
        degraded = wait_for("Degraded")
        assert degraded["message"].startswith("ProgressDeadlineExceeded")
        assert degraded["stableRS"] == done["stableRS"] and degraded["observedGeneration"] == "3"
        assert sim.pods_for("Rollout", "shop", "web") == before  # the stable Pods stay


def test_rollouts_in_discovery_and_rbac(sim: KubeSim, custom: client.CustomObjectsApi) -> None:
    groups = client.ApisApi(custom.api_client).get_api_versions()
    argo = next(g for g in groups.groups if g.name == "argoproj.io")
    assert argo.preferred_version.group_version == "argoproj.io/v1alpha1"
    resources = client.CustomObjectsApi(custom.api_client).get_api_resources(*ARGO)
    assert {(r.name, r.kind, r.namespaced) for r in resources.resources} == {
        ("rollouts", "Rollout", True),
        ("rollouts/status", "Rollout", True),
    }
    assert next(r for r in resources.resources if r.name == "rollouts").short_names == ["ro"]

    sim.create(rollout("web", "shop", "nginx:1.27"))
    sim.grant([Rule(verbs=("get", "list", "patch"), resources=("rollouts",), api_groups=("argoproj.io",))])
    assert custom.list_cluster_custom_object(*ARGO, "rollouts")["items"]
    authz = client.AuthorizationV1Api(custom.api_client)

    def can(verb: str) -> bool:
        attributes = client.V1ResourceAttributes(
            verb=verb, group="argoproj.io", resource="rollouts", namespace="shop"
        )
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
        )
        return bool(authz.create_self_subject_access_review(review).status.allowed)

    assert (can("get"), can("list"), can("patch"), can("delete")) == (True, True, True, False)
    sim.revoke("list", "rollouts", group="argoproj.io")
    assert not can("list")
    with pytest.raises(ApiException) as err:
        custom.list_cluster_custom_object(*ARGO, "rollouts")
    assert err.value.status == 403
    assert (
        'cannot list resource "rollouts" in API group "argoproj.io"' in json.loads(err.value.body)["message"]
    )


# ----------------------------------------------------------------------------- pure patch logic


def test_strategic_merge_directives() -> None:
    orig = {
        "containers": [
            {"name": "a", "image": "a:1", "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "b:1"},
        ],
        "volumes": [{"name": "v", "emptyDir": {}}],
        "tolerations": [{"key": "x"}],
        "nodeSelector": {"disk": "ssd", "zone": "a"},
    }
    patch = {
        "containers": [{"name": "b", "$patch": "delete"}, {"name": "c", "image": "c:1"}],
        "volumes": [{"name": "w", "emptyDir": {}}],
        "tolerations": [{"key": "y"}],  # no merge key: replaced
        "nodeSelector": {"zone": None},
        "$setElementOrder/containers": [{"name": "a"}, {"name": "c"}],
    }
    out = strategic_merge(orig, patch)
    assert [c["name"] for c in out["containers"]] == ["a", "c"]
    assert out["containers"][0]["ports"] == [{"containerPort": 80}]
    assert [v["name"] for v in out["volumes"]] == ["v", "w"]
    assert out["tolerations"] == [{"key": "y"}]
    assert out["nodeSelector"] == {"disk": "ssd"}
    assert "$setElementOrder/containers" not in out
    replaced = strategic_merge(orig, {"nodeSelector": {"$patch": "replace", "only": "this"}})
    assert replaced["nodeSelector"] == {"only": "this"}
    assert strategic_merge(orig, {"containers": [{"$patch": "replace"}, {"name": "z", "image": "z"}]})[
        "containers"
    ] == [{"name": "z", "image": "z"}]


def test_merge_and_json_patch_rfcs() -> None:
    assert merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == {
        "a": "z",
        "c": {"d": "e"},
    }
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    doc = {"a": {"b": [1, 2]}, "x~y": 1, "s/t": 2}
    ops = [
        {"op": "add", "path": "/a/b/-", "value": 3},
        {"op": "add", "path": "/a/b/0", "value": 0},
        {"op": "remove", "path": "/x~0y"},
        {"op": "copy", "from": "/s~1t", "path": "/u"},
        {"op": "move", "from": "/u", "path": "/v"},
        {"op": "test", "path": "/v", "value": 2},
    ]
    assert json_patch(doc, ops) == {"a": {"b": [0, 1, 2, 3]}, "s/t": 2, "v": 2}
    assert doc == {"a": {"b": [1, 2]}, "x~y": 1, "s/t": 2}  # input untouched


def test_selector_parsing() -> None:
    reqs = parse_selector("a=b, c!=d,e,!f,g in (x, y),h notin (z)")
    assert selector_matches(reqs, {"a": "b", "e": "", "g": "y"})
    assert not selector_matches(reqs, {"a": "b", "e": "", "g": "y", "f": "1"})
    assert not selector_matches(reqs, {"a": "b", "e": "", "g": "y", "h": "z"})
    assert selector_matches(parse_selector(""), {})


# ------------------------------------------------------------------------------------------ kubectl


@pytest.fixture
def kubectl(tmp_path: Path) -> Iterator[tuple[KubeSim, object]]:
    binary = shutil.which("kubectl")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl is required in CI")
        pytest.skip("kubectl is not installed")
    # client-go sends a bearer token only over TLS, so this simulator serves https
    with KubeSim(token=TOKEN, tls=True) as s:
        s.create(web_manifest())
        kubeconfig = s.write_kubeconfig(tmp_path / "kubeconfig")

        def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
            cmd = [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), *args]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
            if check and done.returncode != 0:
                pytest.fail(f"{' '.join(args)} failed: {done.stderr}")
            return done

        yield s, run


def test_kubectl_get_patch_label(kubectl) -> None:
    sim, run = kubectl
    listed = json.loads(run("get", "deploy", "-n", "shop", "-o", "json").stdout)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["web"]
    before = sim.get("Deployment", "shop", "web")

    patch = image_patch(f"nginx:1.27@{DIGEST}")
    assert "patched" in run("patch", "deploy", "web", "-n", "shop", "-p", json.dumps(patch)).stdout
    after = sim.get("Deployment", "shop", "web")
    assert containers(after)["app"]["image"] == f"nginx:1.27@{DIGEST}"
    assert containers(after)["app"]["env"] == containers(before)["app"]["env"]
    assert containers(after)["sidecar"] == containers(before)["sidecar"]
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert after["metadata"]["generation"] == 2 and after["status"]["observedGeneration"] == 2
    for pod in sim.pods_for("Deployment", "shop", "web"):
        assert pod["status"]["containerStatuses"][0]["imageID"] == f"nginx@{DIGEST}"

    assert "labeled" in run("label", "deploy", "web", "-n", "shop", "tagpin.dev/follow=true").stdout
    assert sim.get("Deployment", "shop", "web")["metadata"]["labels"]["tagpin.dev/follow"] == "true"
    sim.create(deployment("other", "shop", "redis:7"))
    selected = json.loads(run("get", "deploy", "-A", "-l", "tagpin.dev/follow=true", "-o", "json").stdout)
    assert [i["metadata"]["name"] for i in selected["items"]] == ["web"]

    table = run("get", "deploy", "-n", "shop").stdout  # human output goes through server-side tables
    assert "web" in table and "2/2" in table
    pods = json.loads(run("get", "pods", "-n", "shop", "-l", "app=web", "-o", "json").stdout)["items"]
    assert len(pods) == 2
    missing = run("get", "deploy", "nope", "-n", "shop", check=False)
    assert missing.returncode != 0 and 'deployments.apps "nope" not found' in missing.stderr
    assert sim.count("PATCH", "/deployments/web$") == 2


def test_kubectl_rollout_history_and_undo_read_the_replica_sets(kubectl) -> None:
    sim, run = kubectl
    first = containers(sim.get("Deployment", "shop", "web"))["app"]["image"]
    run("set", "image", "deploy/web", "-n", "shop", f"app=nginx@{DIGEST}")
    sets = sim.list("ReplicaSet", "shop")
    assert [s["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for s in sets] in (
        ["1", "2"],
        ["2", "1"],
    )
    owner = sim.get("Deployment", "shop", "web")["metadata"]["uid"]
    assert all(s["metadata"]["ownerReferences"][0]["uid"] == owner for s in sets)
    newest = max(sets, key=lambda s: int(s["metadata"]["annotations"]["deployment.kubernetes.io/revision"]))
    assert newest["spec"]["replicas"] == 2 and sum(s["spec"]["replicas"] for s in sets) == 2
    thash = newest["metadata"]["labels"]["pod-template-hash"]
    assert all(
        p["metadata"]["labels"]["pod-template-hash"] == thash
        for p in sim.pods_for("Deployment", "shop", "web")
    )
    history = run("rollout", "history", "deploy/web", "-n", "shop").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]

    assert "rolled back" in run("rollout", "undo", "deploy/web", "-n", "shop").stdout
    undone = sim.get("Deployment", "shop", "web")
    assert containers(undone)["app"]["image"] == first
    # the old ReplicaSet is reused at the next revision; revisions only grow
    assert undone["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert len(sim.list("ReplicaSet", "shop")) == 2
    history = run("rollout", "history", "deploy/web", "-n", "shop").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]
    run("rollout", "undo", "deploy/web", "-n", "shop", "--to-revision=2")
    assert containers(sim.get("Deployment", "shop", "web"))["app"]["image"] == f"nginx@{DIGEST}"
    assert "web-" in run("get", "rs", "-n", "shop").stdout

    sim.patch("Deployment", "shop", "web", {"spec": {"revisionHistoryLimit": 1}})
    for tag in ("1.28", "1.29", "1.30"):
        run("set", "image", "deploy/web", "-n", "shop", f"app=nginx:{tag}")
    assert len(sim.list("ReplicaSet", "shop")) == 2  # the newest and one old one
    sim.delete("Deployment", "shop", "web")
    assert sim.list("ReplicaSet", "shop") == []  # the garbage collector follows the owner


def test_kubectl_rollout_status_waits_for_a_delayed_rollout(kubectl) -> None:
    sim, run = kubectl
    sim.rollout_delay = 0.4
    run("set", "image", "deploy/web", "-n", "shop", f"app=nginx@{DIGEST}")
    assert sim.get("Deployment", "shop", "web")["status"]["updatedReplicas"] == 0
    done = run("rollout", "status", "deploy/web", "-n", "shop", "--timeout", "10s")
    assert 'deployment "web" successfully rolled out' in done.stdout
    assert sim.count("GET", "/deployments$") >= 1  # kubectl watched the collection
    for pod in sim.pods_for("Deployment", "shop", "web"):
        assert pod["status"]["containerStatuses"][0]["imageID"] == f"nginx@{DIGEST}"


def test_watch_and_tls_through_the_client() -> None:
    from kubernetes import watch

    with KubeSim(token=TOKEN, tls=True) as sim:
        sim.create(deployment("web", "shop", "nginx:1.27"))
        cfg = client.Configuration(
            host=sim.url, api_key={"BearerToken": TOKEN}, api_key_prefix={"BearerToken": "Bearer"}
        )
        assert sim.url.startswith("https://") and sim.ca_file is not None
        cfg.ssl_ca_cert = str(sim.ca_file)
        apps = client.AppsV1Api(client.ApiClient(cfg))
        rv = apps.list_namespaced_deployment("shop").metadata.resource_version
        sim.create(deployment("api", "shop", "nginx:1.27"))
        apps.patch_namespaced_deployment("web", "shop", image_patch("nginx:1.28"))
        apps.delete_namespaced_deployment("api", "shop")
        events = [
            (e["type"], e["object"].metadata.name)
            for e in watch.Watch().stream(
                apps.list_namespaced_deployment, "shop", resource_version=rv, timeout_seconds=1
            )
        ]
        # the stream polls: changes made before it started show up as their net effect
        assert events == [("ADDED", "web")]

        seen: list[tuple[str, str]] = []
        stream = watch.Watch()
        for e in stream.stream(apps.list_namespaced_deployment, "shop", timeout_seconds=2):
            seen.append((e["type"], e["object"].metadata.name))
            if len(seen) == 1:
                apps.patch_namespaced_deployment("web", "shop", {"metadata": {"labels": {"x": "y"}}})
            if len(seen) == 2:
                apps.delete_namespaced_deployment("web", "shop")
            if len(seen) == 3:
                stream.stop()
        assert seen == [("ADDED", "web"), ("MODIFIED", "web"), ("DELETED", "web")]


def test_kubectl_apply_without_openapi_validation(kubectl, tmp_path: Path) -> None:
    sim, run = kubectl
    manifest = tmp_path / "api.json"
    manifest.write_text(json.dumps(deployment("api", "shop", "ghcr.io/acme/api:1", replicas=1)))
    # no OpenAPI is served, so kubectl's client-side schema validation must be off
    assert "created" in run("apply", "--validate=false", "-f", str(manifest)).stdout
    manifest.write_text(json.dumps(deployment("api", "shop", "ghcr.io/acme/api:2", replicas=1)))
    assert "configured" in run("apply", "--validate=false", "-f", str(manifest)).stdout
    assert containers(sim.get("Deployment", "shop", "api"))["app"]["image"] == "ghcr.io/acme/api:2"
    (pod,) = sim.pods_for("Deployment", "shop", "api")
    assert pod["status"]["containerStatuses"][0]["imageID"].startswith("ghcr.io/acme/api@sha256:")


def test_kubectl_sees_a_rollout_and_its_image(kubectl) -> None:
    sim, run = kubectl
    sim.create(rollout("api", "shop", f"nginx:1.27@{DIGEST}", labels={"tagpin.dev/follow": "true"}))
    image = run(
        "get",
        "rollouts.argoproj.io",
        "api",
        "-n",
        "shop",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    )
    assert image.stdout == f"nginx:1.27@{DIGEST}"
    listed = json.loads(run("get", "ro", "-A", "-l", "tagpin.dev/follow=true", "-o", "json").stdout)
    assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [("Rollout", "api")]
    table = run("get", "rollouts", "-n", "shop").stdout
    assert "api" in table and "Healthy" in table
    assert "rollout.argoproj.io/api" not in run("get", "all", "-n", "shop").stdout  # in no category
    patch = json.dumps(
        {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.28"}]}}}}
    )
    refused = run("patch", "rollouts.argoproj.io", "api", "-n", "shop", "-p", patch, check=False)
    assert refused.returncode != 0 and "json-patch+json" in refused.stderr  # no strategic merge for CRs
    run(
        "patch",
        "ro",
        "api",
        "-n",
        "shop",
        "--type",
        "merge",
        "-p",
        json.dumps({"metadata": {"labels": {"x": "y"}}}),
    )
    assert sim.get("Rollout", "shop", "api")["metadata"]["labels"]["x"] == "y"
