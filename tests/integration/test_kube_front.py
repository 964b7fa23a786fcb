"""The fault-injecting front (tools/tagpin_local/kube/front.py) before the real API server: every
controls the stack's tests use (inject, set_down, count), and identities that survive the hop."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator

import httpx
import pytest
from kubernetes import client
from tagpin_local.kube import KubeCluster
from tagpin_local.kube.front import KubeFront

from tests.conftest import require_binary
from tests.support.kube import cluster

pytestmark = pytest.mark.integration

IMAGE = "127.0.0.1:5000/demo/web:stable"


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeCluster]:
    require_binary("kubectl")
    yield from cluster()


@pytest.fixture
def front(kube: KubeCluster) -> KubeFront:
    return kube.front()


@pytest.fixture
def ns(kube: KubeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = request.node.name.removeprefix("test_").replace("_", "-")[:50].strip("-")
    kube.kubectl("create", "namespace", name)
    kube.kubectl("create", "deployment", "web", f"--image={IMAGE}", "-n", name)
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false")


def raw(kube: KubeCluster, front: KubeFront, cert: bool = True) -> httpx.Client:
    """An HTTP client for the front without retries: as admin (client certificate) or anonymous."""
    context = ssl.create_default_context(cadata=kube.ca_pem.decode())
    if cert:
        assert kube.admin.cert is not None
        context.load_cert_chain(kube.admin.cert.cert, kube.admin.cert.key)
    return httpx.Client(base_url=front.url, verify=context, timeout=10)


def whoami(kube: KubeCluster, front: KubeFront, identity=None) -> dict:
    done = kube.kubectl("auth", "whoami", "-o", "json", identity=identity, server=front.url)
    return json.loads(done.stdout)["status"]["userInfo"]


def test_identities_survive_the_front_and_the_real_authorizer_decides(kube, front, ns):
    admin = whoami(kube, front)
    assert (admin["username"], "system:masters" in admin["groups"]) == ("tagpin-admin", True)
    user = whoami(kube, front, kube.add_user("consumer-role", ("tagpin-consumer", "team-a")))
    assert user["username"] == "consumer-role"
    assert set(user["groups"]) == {"tagpin-consumer", "team-a", "system:authenticated"}
    robot = kube.service_account(ns, "robot")  # a token passes through as it is
    assert whoami(kube, front, robot)["username"] == f"system:serviceaccount:{ns}:robot"
    denied = kube.kubectl("get", "deployments", "-n", ns, identity=robot, server=front.url, check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()
    # A client cannot claim a user with the front's headers: they are dropped, it stays anonymous.
    with raw(kube, front, cert=False) as http:
        forged = http.get(f"/api/v1/namespaces/{ns}", headers={"X-Remote-User": "tagpin-admin"})
        assert http.get("/version").status_code == 200  # anonymous stays anonymous, as without the front
    assert forged.status_code == 403
    assert 'User "system:anonymous"' in forged.json()["message"]


def test_watches_stream_through_the_front(kube, front, ns):
    kube.kubectl(
        "set", "image", "deployment/web", f"web={IMAGE}@sha256:{'e' * 64}", "-n", ns, server=front.url
    )
    done = kube.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=60s", server=front.url)
    assert "successfully rolled out" in done.stdout
    assert front.count("GET", rf"/namespaces/{ns}/deployments$") >= 1  # rollout status lists, then watches


def test_inject_answers_a_status_n_times_for_a_method_and_path_and_count_sees_every_request(kube, front, ns):
    apps = client.AppsV1Api(kube.api_client(server=front.url))
    fault = front.inject("PATCH", rf"/namespaces/{ns}/deployments/web$", status=500, times=2)
    patch = {"metadata": {"labels": {"try": "1"}}}
    for _ in range(2):
        with pytest.raises(client.ApiException) as failed:
            apps.patch_namespaced_deployment("web", ns, patch)
        assert failed.value.status == 500
        assert json.loads(failed.value.body)["message"] == "injected by kubefront"
    apps.patch_namespaced_deployment("web", ns, patch)  # the third reaches the API server
    assert fault.hits == 2
    assert front.count("PATCH", rf"/namespaces/{ns}/deployments/web$") == 3
    assert front.count("GET", rf"/namespaces/{ns}/deployments/web$") == 0
    assert (
        client.AppsV1Api(kube.api_client()).read_namespaced_deployment("web", ns).metadata.labels["try"]
        == "1"
    )


def test_kubectl_retries_a_429_with_retry_after_as_client_go_does(kube, front, ns):
    front.inject("GET", rf"/namespaces/{ns}/deployments/web$", status=429, times=2)
    done = kube.kubectl("get", "deployment", "web", "-n", ns, "-o", "name", server=front.url)
    assert done.stdout.strip() == "deployment.apps/web"
    assert front.count("GET", rf"/namespaces/{ns}/deployments/web$") == 3


def test_delay_drop_and_an_action_before_forwarding(kube, front, ns):
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/web"
    front.inject("GET", f"{path}$", status=None, delay=2.0)
    with raw(kube, front) as http, pytest.raises(httpx.ReadTimeout):
        http.get(path, timeout=0.5)
    front.inject("GET", f"{path}$", drop=True)
    with raw(kube, front) as http, pytest.raises(httpx.RemoteProtocolError):
        http.get(path)
    with raw(kube, front) as http:
        assert http.get(path).status_code == 200  # each fault was used up
    # An action runs before the request goes on: a concurrent write makes its resourceVersion stale,
    # and the real server answers the conflict.
    apps = client.AppsV1Api(kube.api_client(server=front.url))
    current = apps.read_namespaced_deployment("web", ns)
    direct = client.AppsV1Api(kube.api_client())
    front.inject(
        "PUT",
        f"{path}$",
        status=None,
        action=lambda: direct.patch_namespaced_deployment(
            "web", ns, {"metadata": {"labels": {"by": "other"}}}
        ),
    )
    current.metadata.labels = {**(current.metadata.labels or {}), "by": "us"}
    with pytest.raises(client.ApiException) as conflict:
        apps.replace_namespaced_deployment("web", ns, current)
    assert conflict.value.status == 409


def test_set_down_closes_or_answers_503_until_it_is_up_again(kube, front, ns):
    front.set_down(True)
    with raw(kube, front) as http, pytest.raises(httpx.RemoteProtocolError):
        http.get("/version")
    front.set_down(True, mode="503")
    with raw(kube, front) as http:
        assert http.get("/version").status_code == 503
    failed = kube.kubectl("get", "deployments", "-n", ns, server=front.url, check=False)
    assert failed.returncode != 0
    front.set_down(False)
    assert kube.kubectl("get", "deployments", "-n", ns, "-o", "name", server=front.url).stdout.strip() == (
        "deployment.apps/web"
    )
    with pytest.raises(ValueError, match="mode"):
        front.set_down(True, mode="slow")
