"""A workload Argo CD or Flux owns is never patched behind Git's back, as a person sees it: the
real handlers on the local stack (registry, SQS loop, Kubernetes simulator), a push of a followed
tag, and ``tagpin status`` / ``tagpin plan`` run as processes (exit code, stdout, stderr). The
Deployment labelled by an Argo CD application keeps its image, its target is ``owned`` with the
owner and what to configure; its unlabelled neighbour on the same tag rolls and is verified. Named
in ``gitops.patch_live``, the owned one is patched by the next reconcile; polls do not send an
owned target again while its tag stays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tagpin.ports.state import PromotionStatus, TargetStatus
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.cli import Cli, document, endpoints_file, printed
from tests.support.stack import running, state_of, target_status, wait_for

pytestmark = pytest.mark.e2e

OWNED = "prod/shop/Deployment/owned/app"  # labelled by Argo CD (label tracking)
FLUX = "prod/shop/Deployment/flux/app"  # labelled by Flux's kustomize-controller
FREE = "prod/shop/Deployment/free/app"  # no GitOps tool: rolls as always
ROLLOUT = {"verify_interval_seconds": 1, "soak_seconds": 0, "waves": [{"name": "all", "clusters": ["prod"]}]}


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=False, poll_interval=None, consume=True, clusters=["prod"], rollout_delay=0.2
    )
    with LocalStack(options) as stack:
        assert stack.registry is not None
        image = f"{stack.registry.host}/demo/shop:stable"
        kube = stack.kubes["prod"]
        kube.create(deployment("owned", "shop", image, labels={"app.kubernetes.io/instance": "shop"}))
        flux = {
            "kustomize.toolkit.fluxcd.io/name": "apps",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
        }
        kube.create(deployment("flux", "shop", image, labels=flux))
        kube.create(deployment("free", "shop", image))
        yield stack


@pytest.fixture(scope="module")
def cli(st: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    return Cli(st, endpoints_file(st, tmp_path_factory.mktemp("cli") / "endpoints.json"))


def image(st: LocalStack) -> str:
    assert st.registry is not None
    return f"{st.registry.host}/demo/shop:stable"


def configure(st: LocalStack, gitops: dict[str, Any] | None = None) -> None:
    targets = [
        {"cluster": c, "namespace": n, "kind": k, "name": name, "container": ctr}
        for c, n, k, name, ctr in (t.split("/") for t in (OWNED, FLUX, FREE))
    ]
    st.options.images, st.options.rollout = [{"image": image(st), "targets": targets}], ROLLOUT
    config = st.config_document()
    if gitops is not None:
        config["gitops"] = gitops
    st.write_config(config)


def test_an_owned_workload_is_not_patched_and_status_says_why(st: LocalStack, cli: Cli) -> None:
    configure(st)
    before = {t: running(st, t) for t in (OWNED, FLUX)}
    digest = push_image(st.registry.url, "demo/shop", "stable")  # type: ignore[union-attr]
    st.run_poller()
    wait_for("the free workload verified", lambda: target_status(st, FREE, digest) is TargetStatus.VERIFIED)
    wait_for(
        "the owned ones recorded",
        lambda: all(target_status(st, t, digest) is TargetStatus.OWNED for t in (OWNED, FLUX)),
    )
    assert running(st, FREE) == f"{image(st)}@{digest}"
    # the wave did not wait for the owned targets: the promotion completed
    wait_for("the promotion complete", lambda: _promotion(st) is PromotionStatus.COMPLETE)
    assert {t: running(st, t) for t in (OWNED, FLUX)} == before  # never patched behind Git's back

    status, table, plan = cli.many(["--json", "status"], ["status"], ["--json", "plan"])
    (row,) = [r for r in document(status) if r["image"] == image(st)]
    shown = {t["target"]: t for t in row["targets"]}
    assert shown[FREE]["condition"] == "current"
    assert shown[OWNED]["condition"] == "owned"
    assert "managed by Argo CD Application shop (label app.kubernetes.io/instance)" in shown[OWNED]["detail"]
    assert "gitops.patch_live" in shown[OWNED]["detail"]
    assert shown[FLUX]["condition"] == "owned"
    assert "managed by Flux Kustomization flux-system/apps" in shown[FLUX]["detail"]
    text = printed(table)
    assert (
        "owned" in text
        and "Argo CD Application shop" in text
        and "Flux Kustomization flux-system/apps" in text
    )
    planned = {r["target"]: r for r in document(plan) if r["image"] == image(st)}
    assert planned[OWNED]["action"] == "none"
    assert planned[OWNED]["detail"].startswith("managed by Argo CD Application shop")
    assert planned[FREE]["action"] == "none" and "detail" not in planned[FREE]  # already current


def test_polls_do_not_resend_an_owned_target_and_patch_live_takes_effect_at_the_next_reconcile(
    st: LocalStack, cli: Cli
) -> None:
    configure(st)
    digest = push_image(st.registry.url, "demo/shop", "stable", content=b"second")  # type: ignore[union-attr]
    st.run_poller()
    for owned in (OWNED, FLUX):
        wait_for(f"{owned} refused", lambda t=owned: target_status(st, t, digest) is TargetStatus.OWNED)
    wait_for("the free one verified", lambda: target_status(st, FREE, digest) is TargetStatus.VERIFIED)
    refused = len(state_of(st).history.of_target(OWNED))
    polled = st.run_poller()  # the tag did not move: the owned targets are not sent again
    assert polled["enqueued"] == 0 and polled["unchanged"] >= 1, polled
    assert len(state_of(st).history.of_target(OWNED)) == refused
    assert target_status(st, OWNED, digest) is TargetStatus.OWNED

    configure(st, {"patch_live": ["prod/shop/Deployment/owned"]})
    # plan exits 4 (something would roll): the owned one now would, the Flux one still not
    planned = {r["target"]: r for r in cli.json("plan", code=4) if r["image"] == image(st)}
    assert planned[OWNED]["action"] == "roll" and "detail" not in planned[OWNED]
    assert planned[FLUX]["action"] == "none" and planned[FLUX]["detail"].startswith("managed by Flux")
    st.run_reconciler()  # the same digest, no push: the reconciler's heal sends it again
    wait_for("the owned one verified", lambda: target_status(st, OWNED, digest) is TargetStatus.VERIFIED)
    assert running(st, OWNED) == f"{image(st)}@{digest}"
    assert target_status(st, FLUX, digest) is TargetStatus.OWNED and not running(st, FLUX).endswith(digest)


def test_doctor_names_each_owner_and_what_to_configure(st: LocalStack, cli: Cli) -> None:
    configure(st)
    report = cli.json("doctor")
    found = {c["subject"]: c for c in report["checks"] if c["check"] == "gitops"}
    assert set(found) == {OWNED, FLUX}, found  # the free workload is nobody's
    owned, flux = found[OWNED], found[FLUX]
    assert owned["status"] == "warn" and flux["status"] == "warn"
    assert owned["detail"].startswith(
        "Deployment shop/owned is managed by Argo CD Application shop (label app.kubernetes.io/instance): "
        "not patched live, and nothing writes it back through Git"
    )
    assert (
        "gitops.write_back entry for " + image(st) in owned["fix"]
        and f"{OWNED} in gitops.patch_live" in owned["fix"]
    )
    assert (
        "managed by Flux Kustomization flux-system/apps (label kustomize.toolkit.fluxcd.io/name)"
        in flux["detail"]
    )
    assert "Argo CD Application shop" in printed(cli("doctor"))  # the table names it too

    repository = "https://git.example.com/org/shop.git"
    write_back = {
        "image": image(st),
        "repository": repository,
        "targets": ["prod/shop/Deployment/owned"],
        "files": [{"path": "apps/shop/kustomization.yaml", "kind": "kustomize"}],
    }
    configure(st, {"patch_live": ["prod/shop/Deployment/flux"], "write_back": [write_back]})
    found = {c["subject"]: c for c in cli.json("doctor")["checks"] if c["check"] == "gitops"}
    assert (
        found[FLUX]["status"] == "ok" and "patched live (gitops.patch_live names it)" in found[FLUX]["detail"]
    )
    moved = f"moved through Git, {repository}#main apps/shop/kustomization.yaml (kustomize), mode commit"
    assert found[OWNED]["status"] == "warn" and moved in found[OWNED]["detail"]
    assert "no token for git.example.com" in found[OWNED]["detail"]
    assert "gitops.hosts.git.example.com.credentials_secret" in found[OWNED]["fix"]

    hosts = {"git.example.com": {"credentials_secret": "tagpin/git/example"}}
    configure(st, {"hosts": hosts, "write_back": [write_back]})
    found = {c["subject"]: c for c in cli.json("doctor")["checks"] if c["check"] == "gitops"}
    assert "the stack has no write-back queue" in found[OWNED]["detail"]  # this stack: GitWriteBack off
    assert "GitWriteBack=enabled" in found[OWNED]["fix"]


def _promotion(st: LocalStack) -> PromotionStatus | None:
    promotion = state_of(st).promotions.get(image(st))
    return promotion.status if promotion is not None else None
