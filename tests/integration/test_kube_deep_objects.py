"""A labelled custom resource nested as deep as the real API server takes it (Go's decoder: 10,000
levels; Python's parser stops short of that). An Argo Rollout keeps whatever it is given under
``spec.strategy.canary.trafficRouting.plugins``: such a Rollout made the JSON of its whole list
page a ``RecursionError``, and the reconciler skipped its cluster on every run (the continue token
is in the page that fails). Now the one Rollout is skipped, reported, and its targets kept; the
other workloads of its page and of the pages after it are read as before."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin.adapters.kubernetes.auth import kubeconfig_api_client
from tagpin.adapters.kubernetes.pages import NOTE
from tagpin.adapters.kubernetes.workloads import KubeWorkloads
from tagpin.domain.config import Kind
from tagpin.domain.kinds import ImageChange
from tagpin.ports.state import TargetStatus
from tagpin.ports.workloads import Unreadable, Workload
from tagpin.usecases.patch import patch_with_retries
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.manifests import deployment, rollout
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.constants import FOLLOW
from tests.support.kube import local_cluster
from tests.support.stack import drain, state_of
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

# Brackets under plugins.x: with the six objects above them (the Rollout, spec, strategy, canary,
# trafficRouting, plugins) the Rollout is 10,000 levels deep, the most the API server takes.
BRACKETS = 9994
ROLLOUT = Kind("Rollout")
CART = "local/shop/Rollout/cart/app"
_SERIAL = itertools.count()


@pytest.fixture(scope="module")
def kube() -> Iterator[LocalCluster]:
    yield from local_cluster("deep")


@pytest.fixture
def ns(kube: LocalCluster) -> Iterator[str]:
    name = f"deep-{next(_SERIAL)}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    remove_deep(kube, name)
    kube.delete("Namespace", None, name)


def deep(obj: dict[str, Any], brackets: int) -> bytes:
    """``obj`` (a Rollout) as JSON with ``brackets`` nested arrays under its traffic routing plugins
    (written out: Python's own encoder refuses to go that deep)."""
    obj["spec"]["strategy"]["canary"]["trafficRouting"] = {"plugins": {"x": "@"}}
    return json.dumps(obj).replace('"@"', "[" * brackets + "]" * brackets).encode()


def send(
    kube: LocalCluster, method: str, path: str, body: bytes | None, content_type: str
) -> tuple[int, str]:
    """One request as the cluster's admin, the body sent as it is."""
    api = kubeconfig_api_client(kube.kubeconfig(identity=kube.admin), None)
    headers = {"Content-Type": content_type, "Accept": "application/json"}
    for auth in api.configuration.auth_settings().values():
        headers[auth["key"]] = auth["value"]
    url = f"{api.configuration.host}{path}"
    answer = api.rest_client.pool_manager.request(method, url, body=body, headers=headers)
    return answer.status, answer.data.decode(errors="replace")


def create_deep(
    kube: LocalCluster, ns: str, name: str, brackets: int = BRACKETS, labels: dict[str, str] = FOLLOW
) -> tuple[int, str]:
    body = deep(rollout(name, ns, "nginx:1.27", replicas=0, labels=labels), brackets)
    path = f"/apis/argoproj.io/v1alpha1/namespaces/{ns}/rollouts"
    return send(kube, "POST", path, body, "application/json")


def remove_deep(kube: LocalCluster, ns: str) -> None:
    """Delete the namespace's Rollouts and wait until they are gone (the pool that lends the cluster
    lists what is left with Python's parser when it resets it)."""
    path = f"/apis/argoproj.io/v1alpha1/namespaces/{ns}/rollouts"
    send(kube, "DELETE", path, None, "application/json")
    wait_for(
        "the Rollouts deleted", lambda: '"items":[]' in send(kube, "GET", path, None, "application/json")[1]
    )


def client(kube: LocalCluster, page_size: int = 500) -> KubeWorkloads:
    return KubeWorkloads(kubeconfig_api_client(kube.kubeconfig(), None), page_size=page_size)


def test_the_api_server_takes_a_rollout_10000_levels_deep_and_no_deeper(kube: LocalCluster, ns: str) -> None:
    assert create_deep(kube, ns, "deepest")[0] == 201
    status, answer = create_deep(kube, ns, "deeper", BRACKETS + 1)
    assert status == 400 and "depth" in answer
    status, answer = send(
        kube, "GET", f"/apis/argoproj.io/v1alpha1/namespaces/{ns}/rollouts/deepest", None, ""
    )
    assert status == 200 and "[" * BRACKETS + "]" * BRACKETS in answer
    with pytest.raises(RecursionError):  # what the reconciler's list read it as
        json.loads(answer)


@pytest.mark.parametrize("page_size", [1, 500])
def test_a_rollout_too_deep_to_read_is_listed_as_unreadable_and_the_others_as_they_are(
    kube: LocalCluster, ns: str, page_size: int
) -> None:
    labels = {**FOLLOW, "test": ns}
    kube.create(rollout("a", ns, "nginx:1.27", replicas=0, labels=labels))
    assert create_deep(kube, ns, "b", labels=labels)[0] == 201
    kube.create(rollout("c", ns, "nginx:1.27", replicas=0, labels=labels))
    found = list(client(kube, page_size).workloads(ROLLOUT, f"tagpin.dev/follow=true,test={ns}"))
    assert [(w.name, w.unreadable) for w in found] == [("a", None), ("b", NOTE), ("c", None)]
    assert found[0].containers == found[2].containers == {"app": "nginx:1.27"}
    assert (found[1].namespace, found[1].labels, found[1].containers) == (ns, labels, {})


def test_a_rollout_too_deep_to_read_read_alone_is_unreadable(kube: LocalCluster, ns: str) -> None:
    """What the consumer and the reconciler read of one workload: a WorkloadError the consumer
    records (not retried), never a RecursionError."""
    assert create_deep(kube, ns, "deepest")[0] == 201
    with pytest.raises(Unreadable, match=f"Rollout {ns}/deepest: {NOTE}"):
        client(kube).get(ns, ROLLOUT, "deepest")


def deepest_parsed_here() -> int:
    """The deepest nesting ``json.loads`` reads at this depth of the call stack (Python's parser
    stops at its C recursion limit, less what the frames below it use): tagpin's own read of a
    workload, called from here, reads as deep."""
    lo, hi = 1, 20_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            json.loads("[" * mid + "]" * mid)
            lo = mid
        except RecursionError:
            hi = mid - 1
    return lo


def test_a_rollout_as_deep_as_tagpin_reads_is_patched_and_the_patch_reported_landed(
    kube: LocalCluster, ns: str
) -> None:
    """The consumer reads the Rollout, patches it, and is told the patch landed. The client used to
    parse the PATCH's answer (the whole object, which tagpin does not need) with its own parser a
    few frames deeper than tagpin's read: a RecursionError after the server had applied the
    patch, and a change that landed was reported failed."""
    deepest = deepest_parsed_here()
    # the brackets under plugins.x, and the six objects above them
    assert create_deep(kube, ns, "cart", deepest - (10_000 - BRACKETS))[0] == 201
    workloads = client(kube)
    assert workloads.get(ns, ROLLOUT, "cart").containers == {"app": "nginx:1.27"}  # tagpin reads it

    def step(read: Workload) -> tuple[str, ImageChange]:
        return read.resource_version, ImageChange(read.resource_version, "app", False, "nginx:1.28")

    # as the consumer changes it (read again on a 409: Argo's stand-in writes the status meanwhile)
    patched = patch_with_retries(workloads, ROLLOUT, ns, "cart", step, "cart")
    after = workloads.get(ns, ROLLOUT, "cart")
    assert after.containers == {"app": "nginx:1.28"}
    assert int(after.resource_version) > int(patched)


@contextlib.contextmanager
def web_and_cart() -> Iterator[tuple[LocalStack, LocalCluster, str]]:
    """The local stack (no notifications, poll or consumer loops) and its cluster "local", with a
    labelled Deployment ``web`` and Rollout ``cart`` in ``shop`` on a pushed image (its reference)."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=False, poll_interval=None, consume=False)
    with LocalStack(options) as st:
        assert st.registry is not None
        image = f"{st.registry.host}/demo/deep:stable"
        push_image(st.registry.url, "demo/deep", "stable")
        local = st.kubes["local"]
        local.create(deployment("web", "shop", image, container="app", labels=FOLLOW))
        local.create(rollout("cart", "shop", image, replicas=0, labels=FOLLOW))
        yield st, local, image


def test_the_reconciler_skips_the_rollout_not_its_cluster() -> None:
    with web_and_cart() as (st, local, image):
        first = st.run_reconciler()
        assert first["clusters"]["local"]["ok"] and first["added"] == 2
        # The Rollout made as deep as the API server takes it (so is the merge patch's document)
        patch = deep({"spec": {"strategy": {"canary": {}}}}, BRACKETS)
        path = "/apis/argoproj.io/v1alpha1/namespaces/shop/rollouts/cart"
        # and one not labelled, a target of the configuration (read with a GET)
        till = {
            "cluster": "local",
            "namespace": "shop",
            "kind": "Rollout",
            "name": "till",
            "container": "app",
        }
        st.options.images = [*st.options.images, {"image": image, "targets": [till]}]
        st.write_config()
        try:
            assert send(local, "PATCH", path, patch, "application/merge-patch+json")[0] == 200
            assert create_deep(local, "shop", "till", labels={})[0] == 201
            second = st.run_reconciler()
            kept = {e.target_id for e in state_of(st).index.entries()}
        finally:
            remove_deep(local, "shop")
    assert second["clusters"]["local"] == {"ok": True, "workloads": 1}
    assert f"local: Rollout shop/cart skipped: {NOTE}" in second["notes"]
    assert f"local/shop/Rollout/till/app: skipped: Rollout shop/till: {NOTE}" in second["notes"]
    assert second["removed"] == 0  # cart's target kept (its index entry), not healed in this run
    assert CART in first["behind_targets"] and CART not in second["behind_targets"]
    assert kept == {"local/shop/Deployment/web/app", CART}


def test_the_consumer_records_a_rollout_too_deep_to_read_as_failed() -> None:
    """A Rollout indexed, then made too deep to read: the next change of its tag is recorded failed
    on it (Unreadable, not retried), the change's other target applied."""
    with web_and_cart() as (st, local, _image):
        assert st.run_reconciler()["added"] == 2
        drain(st)
        patch = deep({"spec": {"strategy": {"canary": {}}}}, BRACKETS)
        path = "/apis/argoproj.io/v1alpha1/namespaces/shop/rollouts/cart"
        try:
            assert send(local, "PATCH", path, patch, "application/merge-patch+json")[0] == 200
            moved = push_image(st.registry.url, "demo/deep", "stable", content=b"moved")
            st.run_poller()
            drain(st)
            cart = state_of(st).targets.get(CART)
            web = state_of(st).targets.get("local/shop/Deployment/web/app")
        finally:
            remove_deep(local, "shop")
    assert cart is not None and (cart.digest, cart.status) == (moved, TargetStatus.FAILED)
    assert cart.detail == f"Unreadable: Rollout shop/cart: {NOTE}"
    assert web is not None and web.digest == moved and web.status is not TargetStatus.FAILED
