"""The cluster adapter (tagpin.adapters.kubernetes) against a real API server: paged label-selected
LISTs, pods' imageIDs, the real authorizer's 403 and 401, the patches of each kind as the server
applies them, and the optimistic concurrency tagpin relies on.

tagpin connects as it does in AWS: a kubeconfig for the ServiceAccount bound to docs/rbac.yaml,
through the front (which counts requests and injects what a real cluster cannot be made to do on
demand: an expired continue token, a closed connection)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.client import ApiException
from tagpin.adapters.kubernetes.auth import kubeconfig_api_client
from tagpin.adapters.kubernetes.clusters import ClusterConnector
from tagpin.adapters.kubernetes.jsonpatch import json_patch
from tagpin.adapters.kubernetes.workloads import KubeWorkloads
from tagpin.domain.config import Kind, parse_config
from tagpin.domain.kinds import ImageChange, Progress
from tagpin.ports.workloads import Conflict, Forbidden, Pod, Unreachable, Workload
from tagpin.usecases.patch import patch_with_retries, tagpin_annotations
from tagpin_local.kube.front import RequestRecord
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.manifests import cronjob, deployment, rollout

from tests.support.constants import D1, D2, FOLLOW
from tests.support.kube import local_cluster, wait_for

pytestmark = pytest.mark.integration

SELECTOR = "tagpin.dev/follow=true"
_SERIAL = itertools.count()


@pytest.fixture(scope="module")
def kube() -> Iterator[LocalCluster]:
    yield from local_cluster("lab")


@pytest.fixture
def ns(kube: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own; the front's faults and log cleared."""
    name = request.node.name.removeprefix("test_").replace("_", "-")[:40].strip("-").lower()
    name = "".join(c if c.isalnum() or c == "-" else "-" for c in name).strip("-") + f"-{next(_SERIAL)}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    kube.clear_faults()
    kube.clear_requests()
    yield name
    kube.clear_faults()
    kube.restore_rbac()
    kube.delete("Namespace", None, name)


def client(kube: LocalCluster, page_size: int = 500) -> KubeWorkloads:
    """tagpin's client of the cluster, built from the kubeconfig the stack keeps in its secret."""
    return KubeWorkloads(kubeconfig_api_client(kube.kubeconfig(), None), page_size=page_size)


def test_label_selected_list_in_all_namespaces_is_paged(kube, ns):
    # A label of this test's own in the selector: the namespaces of the tests before it may still
    # be terminating, their Deployments listed with these (the namespace controller takes its time)
    labels = {**FOLLOW, "test": ns}
    for i in range(5):
        kube.create(deployment(f"web{i}", f"{ns}-{i % 2}", "nginx:1.27", replicas=0, labels=labels))
    kube.create(deployment("plain", f"{ns}-0", "nginx:1.27", replicas=0, labels={"test": ns}))
    kube.clear_requests()
    found = list(client(kube, page_size=2).workloads(Kind.DEPLOYMENT, f"{SELECTOR},test={ns}"))
    assert sorted(w.name for w in found) == [f"web{i}" for i in range(5)]
    # 2 + 2 + 1: the server pages by limit and continue, never a GET per workload
    assert kube.count("GET", r"^/apis/apps/v1/deployments$") == 3
    assert {w.namespace for w in found} == {f"{ns}-0", f"{ns}-1"}
    assert found[0].selector == {"matchLabels": {"app": found[0].name}}
    assert found[0].labels == labels
    for i in range(2):
        kube.delete("Namespace", None, f"{ns}-{i}")


def test_an_expired_continue_token_restarts_the_list_once(kube, ns):
    for i in range(3):
        kube.create(deployment(f"web{i}", ns, "nginx:1.27", replicas=0, labels=FOLLOW))
    kube.inject("GET", r"/deployments$", status=None, times=1)  # the first page passes
    kube.inject("GET", r"/deployments$", status=410, times=1)  # its continue token has expired
    found = list(client(kube, page_size=2).workloads(Kind.DEPLOYMENT, SELECTOR))
    assert {w.name for w in found if w.namespace == ns} == {"web0", "web1", "web2"}


def test_cronjob_template_and_init_containers_are_read(kube, ns):
    job = cronjob("nightly", ns, "busybox:1", labels=FOLLOW)
    job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "setup", "image": "nginx:1.27"}
    ]
    job["metadata"]["annotations"] = {"tagpin.dev/paused": "true"}
    kube.create(job)
    (found,) = [w for w in client(kube).workloads(Kind.CRONJOB, SELECTOR) if w.namespace == ns]
    assert found.containers == {"job": "busybox:1"} and found.init_containers == {"setup": "nginx:1.27"}
    assert found.selector is None and found.paused


def test_pods_carry_their_image_ids(kube, ns):
    kube.set_image_id("nginx:1.27", f"docker-pullable://nginx@{D1}")  # what the kubelet pulled
    try:
        kube.create(deployment("web", ns, "nginx:1.27", container="web", replicas=2))

        def settled() -> list[Pod] | None:
            pods = [p for p in client(kube).pods(ns) if p.image_ids.get("web")]
            return pods if len(pods) == 2 else None

        pods = wait_for("two pods reporting an imageID", settled)
    finally:
        kube.set_image_id("nginx:1.27", None)
    assert {p.image_ids["web"] for p in pods} == {f"docker-pullable://nginx@{D1}"}
    assert all(p.labels["app"] == "web" for p in pods)


def test_a_rule_taken_out_of_docs_rbac_is_the_real_403_naming_the_verb_and_resource(kube, ns):
    kube.create(cronjob("nightly", ns, "busybox:1", labels=FOLLOW))
    assert [w.name for w in client(kube).workloads(Kind.CRONJOB, SELECTOR) if w.namespace == ns] == [
        "nightly"
    ]
    kube.revoke("list", "cronjobs")  # a cluster administrator edits tagpin-reconciler
    with pytest.raises(Forbidden, match=r"'list' on cronjobs.batch.*docs/rbac.yaml"):
        list(client(kube).workloads(Kind.CRONJOB, SELECTOR))
    assert kube.count("GET", r"/cronjobs$") == 2  # answered by the API server, not the front
    kube.revoke("patch", "deployments")
    kube.create(deployment("web", ns, "nginx:1.27", replicas=0))
    workload = client(kube).get(ns, Kind.DEPLOYMENT, "web")
    change = ImageChange(workload.resource_version, "app", False, f"nginx@{D1}", {})
    with pytest.raises(Forbidden, match=r"'patch' on deployments.apps"):
        client(kube).set_image(ns, Kind.DEPLOYMENT, "web", change)


def test_argo_rollouts_are_listed_by_label_through_the_custom_objects_api(kube, ns):
    for i in range(3):
        kube.create(rollout(f"web{i}", ns, "nginx:1.27", replicas=1, labels=FOLLOW))
    kube.create(rollout("plain", ns, "nginx:1.27"))
    wait_for("the Rollouts Healthy", lambda: all(
        r.get("status", {}).get("phase") == "Healthy" for r in kube.list("Rollout", ns)
    ))  # fmt: skip
    kube.clear_requests()
    found = [w for w in client(kube, page_size=2).workloads(Kind.ROLLOUT, SELECTOR) if w.namespace == ns]
    assert sorted(w.name for w in found) == ["web0", "web1", "web2"]
    assert kube.count("GET", r"^/apis/argoproj.io/v1alpha1/rollouts$") >= 2  # paged, never a GET each
    web = next(w for w in found if w.name == "web0")
    assert (web.kind, web.namespace, web.containers) == (Kind.ROLLOUT, ns, {"app": "nginx:1.27"})
    assert web.selector == {"matchLabels": {"app": "web0"}} and web.labels == FOLLOW
    assert web.manages_own_rollback  # read from its spec: canary steps
    assert web.health.progress is Progress.COMPLETE  # read from its status: Healthy, generation 1 observed


def healthy(kube: LocalCluster, ns: str, name: str) -> None:
    """Wait until Argo's controller (the stand-in) has rolled the Rollout's template out."""

    def done() -> bool:
        obj = kube.get("Rollout", ns, name)
        status = obj.get("status") or {}
        return status.get("phase") == "Healthy" and status.get("observedGeneration") == str(
            obj["metadata"]["generation"]
        )

    wait_for(f"Rollout {ns}/{name} Healthy", done)


def _pin(container: str, image: str) -> Callable[[Workload], tuple[None, ImageChange]]:
    """The step of a use case that pins one container (tagpin.usecases.apply)."""

    def step(workload: Workload) -> tuple[None, ImageChange]:
        notes = tagpin_annotations(workload, container, D1, 1_800_000_000_000, "poll")
        return None, ImageChange(workload.resource_version, container, False, image, notes)

    return step


def attempts(requests: list[RequestRecord]) -> list[int | None]:
    """The attempts of one ``patch_with_retries`` in the requests that reached the front, each
    the status its JSON patch was answered with (None: the adapter found its read stale already
    and sent none). Each attempt is the use case's GET, the adapter's (the container's index in
    the object as it is now), then the PATCH. Argo's controller may write the status between an
    attempt's read and its PATCH (each write is a new resourceVersion): a 409, and read again."""
    tried: list[int | None] = []
    at = 0
    while at < len(requests):
        reads = [(r.method, r.content_type, r.status) for r in requests[at : at + 2]]
        assert reads == [("GET", None, 200)] * 2, requests
        at += 2
        if at < len(requests) and requests[at].method == "PATCH":
            assert requests[at].content_type == "application/json-patch+json", requests
            tried.append(requests[at].status)
            at += 1
        else:
            tried.append(None)
    assert tried, "no request reached the cluster"
    return tried


def test_an_argo_rollout_is_patched_by_a_json_patch_with_the_resource_version_as_precondition(kube, ns):
    manifest = rollout("web", ns, "nginx:1.27", labels=FOLLOW)
    pod = manifest["spec"]["template"]["spec"]
    pod["containers"].insert(
        0, {"name": "sidecar", "image": "envoy:1.30", "env": [{"name": "A", "value": "1"}]}
    )
    kube.create(manifest)
    healthy(kube, ns, "web")
    workloads = client(kube)
    kube.clear_requests()
    patch_with_retries(workloads, Kind.ROLLOUT, ns, "web", _pin("app", f"nginx:1.27@{D1}"), "t")
    tried = attempts(kube.requests)
    assert tried[-1] == 200 and set(tried[:-1]) <= {409, None}  # read again after any conflict
    after = kube.get("Rollout", ns, "web")
    assert after["spec"]["template"]["spec"]["containers"] == [
        {"name": "sidecar", "image": "envoy:1.30", "env": [{"name": "A", "value": "1"}]},  # untouched
        {"name": "app", "image": f"nginx:1.27@{D1}"},
    ]
    notes = after["spec"]["template"]["metadata"]["annotations"]
    assert json.loads(notes["tagpin.dev/digests"]) == {"app": D1} and notes["tagpin.dev/trigger"] == "poll"
    assert after["metadata"]["labels"] == FOLLOW  # pod-template labels and metadata untouched
    assert after["metadata"]["generation"] == 2
    healthy(kube, ns, "web")

    # A read that is stale already: a Conflict, and no PATCH is sent.
    stale = ImageChange("1", "app", False, "nginx:1.28", {})
    kube.clear_requests()
    with pytest.raises(Conflict):
        workloads.set_image(ns, Kind.ROLLOUT, "web", stale)
    assert kube.count("PATCH") == 0

    # Another writer between the adapter's read and its PATCH: the server's 409, then the use
    # case reads again and its second patch lands on top of the other writer's change.
    other = kube.inject(
        "PATCH",
        "/rollouts/web$",
        status=None,
        action=lambda: kube.patch("Rollout", ns, "web", {"metadata": {"labels": {"other": "writer"}}}),
    )
    kube.clear_requests()
    patch_with_retries(workloads, Kind.ROLLOUT, ns, "web", _pin("app", f"nginx:1.27@{D2}"), "t")
    patched = [status for status in attempts(kube.requests) if status is not None]
    assert other.hits == 1 and patched[0] == 409 and patched[-1] == 200
    assert set(patched[1:-1]) <= {409}
    after = kube.get("Rollout", ns, "web")
    assert after["metadata"]["labels"]["other"] == "writer"
    assert after["spec"]["template"]["spec"]["containers"][1]["image"] == f"nginx:1.27@{D2}"


@pytest.mark.parametrize("container", ["app", "migrate"])
def test_the_json_patch_of_a_rollout_does_what_the_strategic_merge_patch_does_to_a_deployment(
    kube, ns, container
):
    """The same body, applied by the API server: a strategic merge patch to a Deployment, the JSON
    patch made from it to a Rollout with the same pod template; the two templates end alike."""
    template = {
        "metadata": {"labels": {"app": "web"}, "annotations": {"team": "a", "tagpin.dev/trigger": "x"}},
        "spec": {
            "initContainers": [{"name": "migrate", "image": "nginx:1.27"}],
            "containers": [
                {"name": "sidecar", "image": "envoy:1.30", "ports": [{"containerPort": 1}]},
                {"name": "app", "image": "nginx:1.27"},
            ],
        },
    }
    for obj in (deployment("web", ns, "x", replicas=0), rollout("web", ns, "x", replicas=0)):
        obj["spec"]["template"] = template
        kube.create(obj)
    notes = {"tagpin.dev/digests": '{"app":"' + D1 + '"}', "tagpin.dev/trigger": "poll"}

    def pin(workload: Workload) -> tuple[None, ImageChange]:
        image = f"nginx:1.27@{D1}"
        return None, ImageChange(workload.resource_version, container, container == "migrate", image, notes)

    for kind in (Kind.DEPLOYMENT, Kind.ROLLOUT):  # read again when a controller wrote its status first
        patch_with_retries(client(kube), kind, ns, "web", pin, "t")
    deployed, rolled = (kube.get(kind, ns, "web")["spec"]["template"] for kind in ("Deployment", "Rollout"))

    def essentials(template: dict[str, Any]) -> dict[str, Any]:
        """What a person wrote (the API server defaults a Deployment's pod template, not a Rollout's)."""
        spec = template["spec"]
        return {
            "annotations": template["metadata"].get("annotations"),
            "labels": template["metadata"].get("labels"),
            **{
                field: [(c["name"], c["image"], c.get("ports")) for c in spec.get(field) or []]
                for field in ("initContainers", "containers")
            },
        }

    assert essentials(deployed) == essentials(rolled)
    assert essentials(rolled)["annotations"] == {"team": "a", **notes}


def test_patches_in_a_row_go_over_one_connection(kube: LocalCluster, ns: str) -> None:
    """A warm consumer's patches one after another: the answer to each PATCH (the whole object,
    which tagpin does not parse) is read to its end and its connection given back to the pool, so
    every request goes over the connection the first one opened. A transient 503 is still tried
    again and a stale resourceVersion is still a Conflict."""
    kind = Kind("Deployment")
    kube.create(deployment("web", ns, "nginx:1.27", replicas=0))
    workloads = client(kube)
    api = workloads.api
    pool = api.rest_client.pool_manager.connection_from_url(api.configuration.host)
    kube.inject("PATCH", r"/deployments/web$", status=503, times=1)  # tried again after Retry-After
    for i in range(20):  # read again when the controller wrote its status first
        patch_with_retries(workloads, kind, ns, "web", _pin("app", f"nginx:1.{i}"), "t")
    with pytest.raises(Conflict):
        workloads.set_image(ns, kind, "web", ImageChange("1", "app", False, "nginx:2", {}))
    assert workloads.get(ns, kind, "web").containers == {"app": "nginx:1.19"}
    patches = [r.status for r in kube.requests if r.method == "PATCH"]
    assert patches.count(200) == 20 and patches.count(503) == 1 and patches[-1] == 409
    assert pool.num_requests >= 2 * 20 + 2
    assert pool.num_connections == 1


def test_a_json_patch_that_replaces_a_stale_resource_version_is_a_conflict(kube, ns):
    """The precondition tagpin's JSON patch of a Rollout carries (tagpin.adapters.kubernetes.jsonpatch)
    is the API server's optimistic concurrency: a 409, as for a strategic merge patch."""
    kube.create(rollout("web", ns, "nginx:1.27", replicas=0))
    current = kube.get("Rollout", ns, "web")
    kube.patch("Rollout", ns, "web", {"metadata": {"labels": {"other": "writer"}}})  # someone else
    body = Kind.ROLLOUT.profile.patch_body(
        ImageChange(current["metadata"]["resourceVersion"], "app", False, "nginx:2", {})
    )
    ops = json_patch(body, current)
    with pytest.raises(ApiException) as refused:
        kube.patch("Rollout", ns, "web", ops, content_type="application/json-patch+json")
    assert refused.value.status == 409
    assert (
        kube.get("Rollout", ns, "web")["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    )


@pytest.mark.parametrize("mode", ["close", "503"])
def test_a_cluster_that_goes_away_is_unreachable(kube, ns, mode):
    kube.set_down(True, mode=mode)
    with pytest.raises(Unreachable):
        list(client(kube).workloads(Kind.DEPLOYMENT, SELECTOR))


def test_rejected_credentials_are_rebuilt_from_the_secret(kube, ns):
    """The API server's 401 for a token it does not know: the cluster is skipped this time; the next
    use re-reads the (rotated) secret."""
    good = kube.tagpin.token
    secret = {"endpoint": kube.url, "token": "old", "ca.crt": kube.ca_pem.decode()}
    secrets = {"tagpin/clusters/lab": json.dumps(secret)}
    config = parse_config("clusters:\n  lab: {service_account: {secret: tagpin/clusters/lab}}\n")
    connector = ClusterConnector(lambda: config, secrets.__getitem__)
    first = connector("lab")
    with pytest.raises(Unreachable, match="401"):
        list(first.workloads(Kind.DEPLOYMENT, SELECTOR))
    assert first.rejected
    secrets["tagpin/clusters/lab"] = json.dumps({**secret, "token": good})
    second = connector("lab")
    assert second is not first
    assert [w for w in second.workloads(Kind.DEPLOYMENT, SELECTOR) if w.namespace == ns] == []
    assert connector("lab") is second  # kept while it works
