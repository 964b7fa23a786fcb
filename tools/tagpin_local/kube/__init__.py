"""A real Kubernetes control plane for tests and the local stack, built from Go modules.

By concern: ``binaries`` (where ``make kube-tools`` put them), ``pki`` (certificates and keys),
``flags`` (the command lines), ``procs`` (the processes, stopped for sure), ``kubelet`` (kwok's
Stages: the kubelets' stand-in and the tests' knobs on it), ``objects`` (objects by kind, KubeSim's
calls), ``front`` (the fault-injecting front, KubeSim's fault controls) and ``cluster``
(:class:`KubeCluster`: start, identities, kubeconfig, kubectl).
"""

from .binaries import BinariesMissing, missing
from .cluster import Identity, KubeCluster, KubectlFailed
from .flags import CONTROLLERS
from .front import KubeFront
from .kubelet import KubeletStages
from .procs import ProcessFailed

__all__ = [
    "CONTROLLERS",
    "BinariesMissing",
    "Identity",
    "KubeCluster",
    "KubeFront",
    "KubectlFailed",
    "KubeletStages",
    "ProcessFailed",
    "missing",
]
