"""Where ``make kube-tools`` (tools/kube/build.sh) put the control plane's binaries.

The versions come from tools/kube/versions.env, the one place they are pinned; the cache is
``$TAGPIN_KUBE_CACHE`` or ``~/.cache/tagpin/kube``, then ``<kubernetes version>/bin``.
"""

from __future__ import annotations

import os
from pathlib import Path

VERSIONS_FILE = Path(__file__).resolve().parents[2] / "kube" / "versions.env"
NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
STAGE_CRD = "kwok.x-k8s.io_stages.yaml"  # kwok's Stage CRD, copied from its module beside the binaries
ROLLOUT_CRD = "argoproj.io_rollouts.yaml"  # Argo Rollouts' Rollout CRD, copied from its module
CRDS = (STAGE_CRD, ROLLOUT_CRD)


class BinariesMissing(RuntimeError):
    """The control plane is not built on this machine."""


def versions() -> dict[str, str]:
    """``KUBERNETES_VERSION``, ``ETCD_VERSION`` and ``KWOK_VERSION`` from versions.env."""
    out: dict[str, str] = {}
    for raw in VERSIONS_FILE.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def bin_dir() -> Path:
    base = os.environ.get("TAGPIN_KUBE_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tagpin" / "kube"
    )
    return Path(base) / versions()["KUBERNETES_VERSION"] / "bin"


def missing() -> list[str]:
    """The binaries not built yet (empty when everything is there)."""
    where = bin_dir()
    absent = [name for name in NAMES if not os.access(where / name, os.X_OK)]
    return absent + [crd for crd in CRDS if not (where / crd).is_file()]


def binary(name: str) -> Path:
    """The path of one binary; :class:`BinariesMissing` names the command that builds it."""
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        raise BinariesMissing(f"{path} is not built: run `make kube-tools` (tools/kube/build.sh)")
    return path
