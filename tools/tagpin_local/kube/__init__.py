"""A real Kubernetes control plane for tests and the local stack, built from Go modules.

By concern: ``binaries`` (where ``make kube-tools`` put them), ``pki`` (certificates and keys),
``procs`` (the processes, stopped for sure), ``kubelet`` (kwok's Stages: the kubelets' stand-in and
the tests' knobs on it) and ``cluster`` (:class:`KubeCluster`: start, identities, kubeconfig, kubectl).
"""

from .binaries import BinariesMissing, missing
from .cluster import Identity, KubeCluster
from .flags import CONTROLLERS
from .kubelet import KubeletStages
from .procs import ProcessFailed

__all__ = [
    "CONTROLLERS",
    "BinariesMissing",
    "Identity",
    "KubeCluster",
    "KubeletStages",
    "ProcessFailed",
    "missing",
]
