"""A real Kubernetes control plane for tests and the local stack, built from Go modules.

By concern: ``binaries`` (where ``make kube-tools`` put them), ``pki`` (certificates and keys),
``flags`` (the command lines), ``procs`` (the processes, stopped for sure), ``kubelet`` (kwok's
Stages: the kubelets' stand-in and the tests' knobs on it), ``objects`` (objects by kind), ``front``
(the fault-injecting front), ``argo``/``argo_steps`` (Argo Rollouts' CRD and a stand-in for its
controller), ``eks`` (EKS's token authentication), ``rbac`` (docs/rbac.yaml for tagpin's
ServiceAccount), ``local`` (:class:`LocalCluster`: one cluster of the local stack), ``pool``
(where a stack's clusters come from), ``manifests`` (minimal workloads) and ``cluster``
(:class:`KubeCluster`: start, identities, kubeconfig, kubectl).
"""

from .access import Identity, KubectlFailed
from .binaries import BinariesMissing, missing
from .cluster import KubeCluster
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
