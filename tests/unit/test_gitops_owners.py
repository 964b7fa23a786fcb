"""Know who owns a workload: Argo CD (tracking annotation, instance label) or Flux (kustomize and
helm toolkit labels), and the Applier never patches such a workload live unless
``gitops.patch_live`` names it; the reason (owner and what to configure) is recorded on the
target. A workload no GitOps tool owns rolls as before."""

from __future__ import annotations

import pytest
from tagpin.domain.config import GitOpsSettings, Kind, RolloutSettings, parse_config
from tagpin.domain.gitops.owners import MAX_SHOWN, GitOpsTool, owner_of
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.ports.state import State, TargetStatus
from tagpin.ports.workloads import Workload
from tagpin.usecases.apply import Applier

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0, D1, WEB, WEB_TARGET

ARGO_ANNOTATION = {"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:demo/web"}
ARGO_LABEL = {"app.kubernetes.io/instance": "shop"}
FLUX_KS = {"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
FLUX_HR = {"helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "demo"}
HELM_INSTALLED = {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "demo"}


@pytest.mark.parametrize(
    ("labels", "annotations", "owner", "evidence"),
    [
        ({}, ARGO_ANNOTATION, "Argo CD Application shop", "annotation argocd.argoproj.io/tracking-id"),
        (ARGO_LABEL, {}, "Argo CD Application shop", "label app.kubernetes.io/instance"),
        # Argo CD renders charts with helm template (no release annotation): still Argo CD's
        (
            ARGO_LABEL | {"helm.sh/chart": "web-1.0.0"},
            {},
            "Argo CD Application shop",
            "label app.kubernetes.io/instance",
        ),
        (FLUX_KS, {}, "Flux Kustomization flux-system/apps", "label kustomize.toolkit.fluxcd.io/name"),
        (
            FLUX_HR | ARGO_LABEL,
            HELM_INSTALLED,
            "Flux HelmRelease demo/web",
            "label helm.toolkit.fluxcd.io/name",
        ),
        (
            {"kustomize.toolkit.fluxcd.io/name": "apps"},
            {},
            "Flux Kustomization apps",
            "label kustomize.toolkit.fluxcd.io/name",
        ),
    ],
)
def test_owner_of_each_tool(
    labels: dict[str, str], annotations: dict[str, str], owner: str, evidence: str
) -> None:
    found = owner_of(labels, annotations)
    assert found is not None
    assert (str(found), found.evidence) == (owner, evidence)


@pytest.mark.parametrize(
    ("labels", "annotations"),
    [
        ({}, {}),
        ({"app": "web", "app.kubernetes.io/name": "web"}, {}),
        # `helm install` writes the instance label with the release's name, and the release annotation
        (ARGO_LABEL | {"app.kubernetes.io/managed-by": "Helm"}, HELM_INSTALLED),
        ({"app.kubernetes.io/instance": ""}, {"argocd.argoproj.io/tracking-id": ""}),
    ],
)
def test_no_owner(labels: dict[str, str], annotations: dict[str, str]) -> None:
    assert owner_of(labels, annotations) is None


def test_the_instance_label_is_configurable_or_off() -> None:
    custom = GitOpsSettings.model_validate({"argocd_instance_label": "argocd.argoproj.io/instance"})
    assert custom.owner_of(ARGO_LABEL, {}) is None
    assert str(custom.owner_of({"argocd.argoproj.io/instance": "shop"}, {})) == "Argo CD Application shop"
    off = GitOpsSettings.model_validate({"argocd_instance_label": None})
    assert off.owner_of(ARGO_LABEL, {}) is None
    assert off.owner_of({}, ARGO_ANNOTATION) is not None  # the annotation always counts


def test_values_from_the_cluster_are_bounded_and_printable() -> None:
    owner = owner_of(
        {}, {"argocd.argoproj.io/tracking-id": "\x1b[31m" + "x" * 10_000 + ":apps/Deployment:a/b"}
    )
    assert owner is not None and owner.tool is GitOpsTool.ARGO_CD
    assert owner.name.isprintable() and len(owner.name) <= MAX_SHOWN + 3


# -- the Applier --------------------------------------------------------------------------------

CONFIG = parse_config(
    """
clusters:
  dev: {kubeconfig: {file: /dev/null}}
images:
  - image: 127.0.0.1:5000/demo/web:stable
    targets:
      - {cluster: dev, namespace: demo, name: web, container: app}
"""
)


def clusters(labels: dict[str, str], annotations: dict[str, str] | None = None) -> FakeClusters:
    web = Workload(
        "100",
        {"app": f"127.0.0.1:5000/demo/web:stable@{D0}"},
        namespace="demo",
        name="web",
        labels=labels,
        annotations=annotations or {},
    )
    return FakeClusters(dev=FakeCluster([web]))


def applier(store: State, fake: FakeClusters, gitops: GitOpsSettings, dry_run: bool = False) -> Applier:
    return Applier(
        followed=lambda: CONFIG.followed,
        state=store,
        workloads=fake,
        clock=FakeClock(1_800_000_000_000, step=1_000),
        settings=lambda: RolloutSettings(dry_run=dry_run),
        gitops=lambda: gitops,
    )


def change(digest: str = D1) -> Change:
    return Change(move=Move(image=WEB, digest=digest, observed_at=1_000, trigger=Trigger.POLL))


@pytest.mark.parametrize(
    ("labels", "annotations"), [(ARGO_LABEL, {}), ({}, ARGO_ANNOTATION), (FLUX_KS, {}), (FLUX_HR, {})]
)
def test_an_owned_workload_is_not_patched_and_the_reason_is_recorded(
    store: State, labels: dict[str, str], annotations: dict[str, str]
) -> None:
    fake = clusters(labels, annotations)
    (result,) = applier(store, fake, GitOpsSettings()).apply(change())
    assert result.outcome is ApplyOutcome.OWNED
    assert fake["dev"].patches == []
    state = store.targets.get(WEB_TARGET)
    assert state is not None and state.status is TargetStatus.OWNED and state.digest == D1
    owner = owner_of(labels, annotations)
    assert state.detail is not None and f"managed by {owner} ({owner.evidence})" in state.detail  # type: ignore[union-attr]
    assert "gitops.patch_live" in state.detail
    # The next delivery of the same digest is refused the same way: nothing patched behind Git's back
    (again,) = applier(store, fake, GitOpsSettings()).apply(change())
    assert again.outcome is ApplyOutcome.OWNED and fake["dev"].patches == []


@pytest.mark.parametrize("selector", ["dev/demo/Deployment/web", "*/*/*/*", "dev/*/Deployment/*"])
def test_patch_live_names_the_targets_that_may_be_patched_anyway(store: State, selector: str) -> None:
    fake = clusters(ARGO_LABEL)
    gitops = GitOpsSettings.model_validate({"patch_live": [selector]})
    (result,) = applier(store, fake, gitops).apply(change())
    assert result.outcome is ApplyOutcome.PATCHED
    assert fake["dev"].image("demo", Kind.DEPLOYMENT, "web", "app") == f"127.0.0.1:5000/demo/web:stable@{D1}"


def test_patch_live_for_another_target_does_not_apply(store: State) -> None:
    fake = clusters(FLUX_KS)
    gitops = GitOpsSettings.model_validate({"patch_live": ["dev/demo/Deployment/api", "prod/*/*/*"]})
    (result,) = applier(store, fake, gitops).apply(change())
    assert result.outcome is ApplyOutcome.OWNED and fake["dev"].patches == []


def test_a_workload_nobody_owns_rolls_as_before(store: State) -> None:
    fake = clusters({"app": "web"}, HELM_INSTALLED | {"deployment.kubernetes.io/revision": "3"})
    (result,) = applier(store, fake, GitOpsSettings()).apply(change())
    assert result.outcome is ApplyOutcome.PATCHED and len(fake["dev"].patches) == 1


def test_a_dry_run_plan_names_the_owner(store: State) -> None:
    fake = clusters(FLUX_HR)
    (row,) = applier(store, fake, GitOpsSettings(), dry_run=True).apply(change())
    assert row.outcome is ApplyOutcome.PLANNED
    assert row.detail is not None and row.detail.startswith("none: managed by Flux HelmRelease demo/web")
    assert fake["dev"].patches == []
