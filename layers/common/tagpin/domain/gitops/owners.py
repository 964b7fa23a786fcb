"""Who owns a workload: Argo CD or Flux, read from what each tool writes on the resources it
applies. A live patch of such a workload is reverted by the tool (Argo CD's self-heal, Flux's next
reconcile), so tagpin does not patch it unless the configuration says so (``gitops.patch_live``).

- **Argo CD**: the annotation ``argocd.argoproj.io/tracking-id`` (``<app>:<group>/<kind>:<ns>/<name>``;
  annotation tracking, Argo CD 3's default), else its instance label
  (``app.kubernetes.io/instance`` = the application; label tracking, the default before 3.0, key
  configurable as argocd-cm's ``application.instanceLabelKey``: ``gitops.argocd_instance_label``).
  Helm writes the same label on what it installs, with the release's name: a workload Helm
  installed itself carries the annotation ``meta.helm.sh/release-name`` (Argo CD renders charts
  with ``helm template``, which writes none), so that label alone does not make it Argo CD's.
- **Flux**: kustomize-controller's labels ``kustomize.toolkit.fluxcd.io/name`` and ``/namespace``
  (a Kustomization), helm-controller's ``helm.toolkit.fluxcd.io/name`` and ``/namespace`` (a
  HelmRelease).

The values come from the cluster: untrusted text, so they are bounded and made printable before
they reach a status, a log or a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

ARGOCD_TRACKING_ID = "argocd.argoproj.io/tracking-id"
ARGOCD_INSTANCE_LABEL = "app.kubernetes.io/instance"
HELM_RELEASE = "meta.helm.sh/release-name"
FLUX_KUSTOMIZATION = "kustomize.toolkit.fluxcd.io/"
FLUX_HELMRELEASE = "helm.toolkit.fluxcd.io/"
MAX_SHOWN = 120


class GitOpsTool(StrEnum):
    ARGO_CD = "Argo CD"
    FLUX = "Flux"


@dataclass(frozen=True)
class Owner:
    """The GitOps object that applies the workload: ``Argo CD application web``, ``Flux
    Kustomization flux-system/apps``; ``evidence`` is the label or annotation that says so."""

    tool: GitOpsTool
    kind: str  # Application, Kustomization, HelmRelease
    name: str
    evidence: str

    def __str__(self) -> str:
        return f"{self.tool.value} {self.kind} {self.name}"


def shown(value: str) -> str:
    """Untrusted text from the cluster, bounded and printable."""
    clean = "".join(c if c.isprintable() else "?" for c in value[: MAX_SHOWN + 1])
    return clean if len(clean) <= MAX_SHOWN else clean[:MAX_SHOWN] + "..."


def owner_of(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    *,
    instance_label: str | None = ARGOCD_INSTANCE_LABEL,
) -> Owner | None:
    """The GitOps tool that owns a workload with these labels and annotations, or None."""
    tracking = annotations.get(ARGOCD_TRACKING_ID)
    if tracking:
        app = tracking.split(":", 1)[0] or tracking
        return Owner(GitOpsTool.ARGO_CD, "Application", shown(app), f"annotation {ARGOCD_TRACKING_ID}")
    for prefix, kind in ((FLUX_KUSTOMIZATION, "Kustomization"), (FLUX_HELMRELEASE, "HelmRelease")):
        name = labels.get(prefix + "name")
        if name:
            namespace = labels.get(prefix + "namespace")
            full = f"{namespace}/{name}" if namespace else name
            return Owner(GitOpsTool.FLUX, kind, shown(full), f"label {prefix}name")
    instance = labels.get(instance_label) if instance_label else None
    if instance and HELM_RELEASE not in annotations:
        return Owner(GitOpsTool.ARGO_CD, "Application", shown(instance), f"label {instance_label}")
    return None
