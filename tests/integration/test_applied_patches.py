"""tests/support/patches.py against the real API server: a PATCH it refuses with 409 Conflict (a
stale resourceVersion, as when the controller-manager wrote the object after tagpin read it) is
not a patch applied; ``count`` sees both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from tagpin_local.kube import KubeCluster
from tagpin_local.kube.front import KubeFront, RequestRecord
from tagpin_local.kube.manifests import deployment

from tests.support.kube import cluster
from tests.support.patches import applied_patches

pytestmark = pytest.mark.integration

NS = "applied-patches"
WEB = rf"/namespaces/{NS}/deployments/web$"


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeCluster]:
    yield from cluster()


@pytest.fixture
def front(kube: KubeCluster) -> Iterator[KubeFront]:
    core = client.CoreV1Api(kube.api_client())
    core.create_namespace({"metadata": {"name": NS}})
    client.AppsV1Api(kube.api_client()).create_namespaced_deployment(
        NS, deployment("web", NS, "127.0.0.1:5000/demo/web:stable", container="web")
    )
    front = kube.front()
    yield front
    kube.drop_front(front)
    core.delete_namespace(NS)


def test_a_patch_refused_with_409_then_one_applied_counts_one(kube: KubeCluster, front: KubeFront) -> None:
    admin = client.AppsV1Api(kube.api_client())  # straight to the API server: not recorded
    through = client.AppsV1Api(kube.api_client(server=front.url))
    read = admin.read_namespaced_deployment("web", NS).metadata.resource_version
    admin.patch_namespaced_deployment("web", NS, {"metadata": {"labels": {"other": "writer"}}})
    stale = {"metadata": {"resourceVersion": read, "labels": {"tagpin": "1"}}}
    with pytest.raises(client.ApiException) as refused:
        through.patch_namespaced_deployment("web", NS, stale)
    assert refused.value.status == 409  # the real API server's Conflict, not a fault's
    through.patch_namespaced_deployment("web", NS, {"metadata": {"labels": {"tagpin": "1"}}})
    assert admin.read_namespaced_deployment("web", NS).metadata.labels["tagpin"] == "1"
    assert [r.status for r in front.requests if r.method == "PATCH"] == [409, 200]
    assert front.count("PATCH", WEB) == 2  # the attempts: what the old assertions counted
    assert applied_patches(front, WEB) == 1
    assert applied_patches(front, r"/deployments/api$") == 0


class Log:
    def __init__(self, *requests: RequestRecord) -> None:
        self.requests = list(requests)


def test_only_an_answer_below_300_is_applied() -> None:
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    log = Log(
        RequestRecord("PATCH", path, None, 500),  # a fault's answer
        RequestRecord("PATCH", path, None, None),  # in flight, or its connection dropped
        RequestRecord("PATCH", path, None, 422),
        RequestRecord("GET", path, None, 200),
        RequestRecord("PATCH", path + "s", None, 200),  # another object the regex leaves out
        RequestRecord("PATCH", path, None, 201),
    )
    assert applied_patches(log, r"/deployments/web$") == 1
    assert applied_patches(log) == 2
