"""The cluster adapter for reconcile: paged label-selected LISTs, pods' imageIDs, error translation,
credentials (EKS token regeneration, assumed roles, service-account secrets), and the RBAC manifest
against what the code calls. The Kubernetes side is the in-process simulator on 127.0.0.1."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from botocore.credentials import Credentials
from kubernetes.client import ApiClient, Configuration
from tagpin.adapters.kubernetes.auth import TOKEN_LIFETIME_S, TOKEN_MARGIN_S, EksToken, aws_credentials
from tagpin.adapters.kubernetes.clusters import ClusterConnector
from tagpin.adapters.kubernetes.workloads import KubeWorkloads
from tagpin.domain.config import Kind, parse_config
from tagpin.ports.workloads import Conflict, Forbidden, Unreachable, Workload
from tagpin.usecases.patch import image_patch, patch_with_retries, tagpin_annotations
from tagpin_local.kubesim import KubeSim, cronjob, deployment, rollout

from tests.support.clock import FakeClock
from tests.support.constants import D1, D2, FOLLOW, ROOT

RBAC = ROOT / "docs" / "rbac.yaml"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(token="t0k3n") as server:
        yield server


def client(sim: KubeSim, token: str = "t0k3n", page_size: int = 500) -> KubeWorkloads:
    configuration = Configuration(host=sim.url)
    configuration.api_key["authorization"] = token
    configuration.api_key_prefix["authorization"] = "Bearer"
    configuration.retries = 0
    return KubeWorkloads(ApiClient(configuration), page_size=page_size)


def test_label_selected_list_in_all_namespaces_is_paged(sim):
    for i in range(5):
        sim.create(deployment(f"web{i}", f"ns{i % 2}", "nginx:1.27", replicas=0, labels=FOLLOW))
    sim.create(deployment("plain", "ns0", "nginx:1.27", replicas=0))
    sim.clear_requests()
    found = list(client(sim, page_size=2).workloads(Kind.DEPLOYMENT, "tagpin.dev/follow=true"))
    assert sorted(w.name for w in found) == [f"web{i}" for i in range(5)]
    assert sim.count("GET", r"^/apis/apps/v1/deployments$") == 3  # 2 + 2 + 1, never a GET per workload
    assert {w.namespace for w in found} == {"ns0", "ns1"}
    assert found[0].selector == {"matchLabels": {"app": found[0].name}}
    assert found[0].labels == FOLLOW


def test_an_expired_continue_token_restarts_the_list_once(sim):
    for i in range(3):
        sim.create(deployment(f"web{i}", "shop", "nginx:1.27", replicas=0, labels=FOLLOW))
    sim.inject("GET", r"/deployments$", status=None, times=1)  # the first page passes
    sim.inject("GET", r"/deployments$", status=410, times=1)  # its continue token has expired
    found = list(client(sim, page_size=2).workloads(Kind.DEPLOYMENT, "tagpin.dev/follow=true"))
    assert {w.name for w in found} == {"web0", "web1", "web2"}


def test_cronjob_template_and_init_containers_are_read(sim):
    job = cronjob("nightly", "batch", "busybox:1", labels=FOLLOW)
    job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "setup", "image": "nginx:1.27"}
    ]
    job["metadata"]["annotations"] = {"tagpin.dev/paused": "true"}
    sim.create(job)
    (found,) = client(sim).workloads(Kind.CRONJOB, "tagpin.dev/follow=true")
    assert found.containers == {"job": "busybox:1"} and found.init_containers == {"setup": "nginx:1.27"}
    assert found.selector is None and found.paused


def test_pods_carry_their_image_ids(sim):
    sim.image_id_for = lambda image: f"docker-pullable://nginx@{D1}"
    sim.create(deployment("web", "shop", "nginx:1.27", container="web", replicas=2))
    pods = list(client(sim).pods("shop"))
    assert len(pods) == 2
    assert {p.image_ids["web"] for p in pods} == {f"docker-pullable://nginx@{D1}"}
    assert all(p.labels["app"] == "web" for p in pods)


def test_forbidden_names_the_verb_and_the_resource(sim):
    sim.inject("GET", r"/cronjobs$", status=403)
    with pytest.raises(Forbidden, match=r"'list' on cronjobs.batch.*docs/rbac.yaml"):
        list(client(sim).workloads(Kind.CRONJOB, "tagpin.dev/follow=true"))


def test_argo_rollouts_are_listed_by_label_through_the_custom_objects_api(sim):
    for i in range(3):
        sim.create(rollout(f"web{i}", f"ns{i % 2}", "nginx:1.27", replicas=1, labels=FOLLOW))
    sim.create(rollout("plain", "ns0", "nginx:1.27"))
    sim.clear_requests()
    found = list(client(sim, page_size=2).workloads(Kind.ROLLOUT, "tagpin.dev/follow=true"))
    assert sorted(w.name for w in found) == ["web0", "web1", "web2"]
    assert sim.count("GET", r"^/apis/argoproj.io/v1alpha1/rollouts$") == 2  # paged, never a GET each
    web = next(w for w in found if w.name == "web0")
    assert (web.kind, web.namespace, web.containers, web.generation) == (
        Kind.ROLLOUT,
        "ns0",
        {"app": "nginx:1.27"},
        1,
    )
    assert web.selector == {"matchLabels": {"app": "web0"}} and web.labels == FOLLOW
    assert web.spec["strategy"] == {"canary": {"steps": [{"setWeight": 50}]}}
    assert web.status["phase"] == "Healthy" and web.status["observedGeneration"] == "1"
    sim.inject("GET", r"/rollouts$", status=403)
    with pytest.raises(Forbidden, match=r"'list' on rollouts.argoproj.io.*docs/rbac.yaml"):
        list(client(sim).workloads(Kind.ROLLOUT, "tagpin.dev/follow=true"))


def _pin(container: str, image: str) -> Callable[[Workload], tuple[None, dict[str, Any]]]:
    """The step of a use case that pins one container (tagpin.usecases.apply)."""

    def step(workload: Workload) -> tuple[None, dict[str, Any]]:
        notes = tagpin_annotations(workload, container, D1, 1_800_000_000_000, "poll")
        return None, image_patch(workload.kind, workload.resource_version, container, False, image, notes)

    return step


def test_an_argo_rollout_is_patched_by_a_json_patch_with_the_resource_version_as_precondition(sim):
    manifest = rollout("web", "shop", "nginx:1.27", labels=FOLLOW)
    pod = manifest["spec"]["template"]["spec"]
    pod["containers"].insert(
        0, {"name": "sidecar", "image": "envoy:1.30", "env": [{"name": "A", "value": "1"}]}
    )
    sim.create(manifest)
    workloads = client(sim)
    sim.clear_requests()
    patch_with_retries(workloads, Kind.ROLLOUT, "shop", "web", _pin("app", f"nginx:1.27@{D1}"), "t")
    assert [(r.method, r.content_type) for r in sim.requests] == [
        ("GET", None),  # the use case's read
        ("GET", None),  # the adapter's: the container's index in the object as it is now
        ("PATCH", "application/json-patch+json"),
    ]
    after = sim.get("Rollout", "shop", "web")
    assert after["spec"]["template"]["spec"]["containers"] == [
        {"name": "sidecar", "image": "envoy:1.30", "env": [{"name": "A", "value": "1"}]},  # untouched
        {"name": "app", "image": f"nginx:1.27@{D1}"},
    ]
    notes = after["spec"]["template"]["metadata"]["annotations"]
    assert json.loads(notes["tagpin.dev/digests"]) == {"app": D1} and notes["tagpin.dev/trigger"] == "poll"
    assert after["metadata"]["labels"] == FOLLOW  # pod-template labels and metadata untouched
    assert after["metadata"]["generation"] == 2 and after["status"]["phase"] == "Healthy"

    # A read that is stale already: a Conflict, and no PATCH is sent.
    stale = image_patch(Kind.ROLLOUT, "1", "app", False, "nginx:1.28", {})
    sim.clear_requests()
    with pytest.raises(Conflict):
        workloads.patch("shop", Kind.ROLLOUT, "web", stale)
    assert sim.count("PATCH") == 0

    # Another writer between the adapter's read and its PATCH: the server's 409, then the use
    # case reads again and its second patch lands on top of the other writer's change.
    other = sim.inject(
        "PATCH",
        "/rollouts/web$",
        status=None,
        action=lambda: sim.patch("Rollout", "shop", "web", {"metadata": {"labels": {"other": "writer"}}}),
    )
    sim.clear_requests()
    patch_with_retries(workloads, Kind.ROLLOUT, "shop", "web", _pin("app", f"nginx:1.27@{D2}"), "t")
    assert other.hits == 1 and sim.count("PATCH") == 2
    after = sim.get("Rollout", "shop", "web")
    assert after["metadata"]["labels"]["other"] == "writer"
    assert after["spec"]["template"]["spec"]["containers"][1]["image"] == f"nginx:1.27@{D2}"


@pytest.mark.parametrize("mode", ["close", "503"])
def test_a_cluster_that_goes_away_is_unreachable(sim, mode):
    sim.set_down(True, mode=mode)
    with pytest.raises(Unreachable):
        list(client(sim).workloads(Kind.DEPLOYMENT, "tagpin.dev/follow=true"))


def test_rejected_credentials_are_rebuilt_from_the_secret(sim):
    """401: the cluster is skipped this time; the next use re-reads the (rotated) secret."""
    secrets = {"tagpin/clusters/lab": json.dumps({"endpoint": sim.url, "token": "old"})}
    config = parse_config("clusters:\n  lab: {service_account: {secret: tagpin/clusters/lab}}\n")
    connector = ClusterConnector(lambda: config, secrets.__getitem__)
    first = connector("lab")
    with pytest.raises(Unreachable, match="401"):
        list(first.workloads(Kind.DEPLOYMENT, "tagpin.dev/follow=true"))
    assert first.rejected
    secrets["tagpin/clusters/lab"] = json.dumps({"endpoint": sim.url, "token": "t0k3n"})
    second = connector("lab")
    assert second is not first
    assert list(second.workloads(Kind.DEPLOYMENT, "tagpin.dev/follow=true")) == []
    assert connector("lab") is second  # kept while it works


@pytest.mark.parametrize(
    ("secret", "match"),
    [
        ({"token": "t"}, "no 'endpoint'"),
        ({"endpoint": "https://127.0.0.1:1"}, "no 'token'"),
        ([], "not a JSON object"),
    ],
)
def test_malformed_service_account_secrets_are_unreachable(secret, match):
    config = parse_config("clusters:\n  lab: {service_account: {secret: tagpin/clusters/lab}}\n")
    connector = ClusterConnector(lambda: config, lambda _name: json.dumps(secret))
    with pytest.raises(Unreachable, match=match):
        connector("lab")


def test_service_account_ca_may_be_pem_or_base64(tmp_path):
    from tagpin.adapters.kubernetes.auth import service_account_api_client

    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    for ca in (pem, base64.b64encode(pem.encode()).decode()):
        api = service_account_api_client({"endpoint": "https://10.0.0.1", "token": "t", "ca.crt": ca})
        assert Path(api.configuration.ssl_ca_cert).read_text() == pem
        assert api.configuration.api_key["authorization"] == "t"


# -- EKS ---------------------------------------------------------------------------------------------


def _decoded(token: str) -> str:
    assert token.startswith("k8s-aws-v1.")
    body = token.removeprefix("k8s-aws-v1.")
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def test_eks_token_is_presigned_and_regenerated_before_it_expires(aws_env):
    clock = FakeClock(1000.0)
    hook = EksToken("prod", Credentials("AKIDEXAMPLE", "secret"), "eu-west-1", clock=clock)
    configuration = Configuration(host="https://example.invalid")
    hook(configuration)
    first = configuration.api_key["authorization"]
    url = urlsplit(_decoded(first))
    query = parse_qs(url.query)
    assert url.netloc == "sts.eu-west-1.amazonaws.com"
    assert query["Action"] == ["GetCallerIdentity"] and query["X-Amz-Expires"] == ["60"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0]
    assert configuration.api_key["BearerToken"] == first
    clock.advance(TOKEN_LIFETIME_S - TOKEN_MARGIN_S - 1)
    hook(configuration)
    assert hook.generated == 1  # still valid: not regenerated on every request
    clock.advance(2)
    hook(configuration)
    assert hook.generated == 2  # a minute before EKS stops honouring it: a new one


def test_a_cluster_role_is_assumed_with_refreshing_credentials(aws):
    credentials = aws_credentials("arn:aws:iam::123456789012:role/tagpin-cluster")
    assert credentials.method == "assume-role"
    frozen = credentials.get_frozen_credentials()  # fetched from STS (moto) on first use
    source = aws_credentials(None)  # the function's own credentials, as the environment gives them
    assert source.method != "assume-role"
    assert frozen.access_key and frozen.access_key != source.get_frozen_credentials().access_key


# -- RBAC --------------------------------------------------------------------------------------------


def _rules() -> dict[str, set[tuple[str, str, str]]]:
    roles: dict[str, set[tuple[str, str, str]]] = {}
    for doc in yaml.safe_load_all(RBAC.read_text()):
        if doc["kind"] == "ClusterRole":
            roles[doc["metadata"]["name"]] = {
                (group, resource, verb)
                for rule in doc["rules"]
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    return roles


def test_rbac_is_exactly_what_the_code_calls():
    kinds = {
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "cronjobs"),
        ("argoproj.io", "rollouts"),
    }
    roles = _rules()
    assert roles["tagpin-reconciler"] == {(g, r, v) for g, r in kinds for v in ("get", "list")} | {
        ("", "pods", "list")
    }
    # the consumer may also list nodes: what platforms they run, for the platform gate (it falls back
    # to the cluster's configured platforms where it may not)
    assert roles["tagpin-consumer"] == {(g, r, v) for g, r in kinds for v in ("get", "patch")} | {
        ("", "nodes", "list")
    }
