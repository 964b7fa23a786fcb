"""The GitOps owner: a workload Argo CD or Flux owns would be reverted by it after a live patch, so
it is not patched live unless ``gitops.patch_live`` names the target (docs/gitops.md).

The one place that says so: the patch step (its workload as read), the dry run, ``tagpin plan``
and the console ask this gate. Where ``gitops.write_back`` configures the target, the move goes,
through Git (its reason says where): the consumer hands it to the write-back
(``tagpin.usecases.gitroute``) instead of patching it.
"""

from __future__ import annotations

from collections.abc import Callable

from tagpin.domain.config import GitOpsSettings, Target
from tagpin.domain.gitops.owners import Owner
from tagpin.domain.moves import Move
from tagpin.ports.workloads import Workload
from tagpin.usecases.admission.decision import Decision, GateName, Known, Stage, Verdict
from tagpin.usecases.admission.hold import NOT_READ


def live_owner(settings: GitOpsSettings, workload: Workload, target_id: str) -> Owner | None:
    """The GitOps tool that owns ``workload`` when tagpin may not patch it live, else None."""
    owner = settings.owner_of(workload.labels, workload.annotations)
    return None if owner is None or settings.live_allowed(target_id) else owner


def not_live(owner: Owner) -> str:
    """Why an owned workload is not patched, and what to configure (status, plan, history)."""
    return (
        f"managed by {owner} ({owner.evidence}): not patched live, {owner.tool.value} would revert "
        "it; write it back through Git, or name the target in gitops.patch_live (docs/gitops.md)"
    )


class OwnerGate:
    name = GateName.OWNER
    stage = Stage.WORKLOAD

    def __init__(self, gitops: Callable[[], GitOpsSettings]) -> None:
        self._gitops = gitops

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        if known.workload is None:
            return Decision.unknown(self.name, NOT_READ)
        settings = self._gitops()
        owner = live_owner(settings, known.workload, target.id)
        if owner is None:
            return Decision.go(self.name)
        written = settings.for_target(move.image, target.id)
        if written:  # a commit moves it (docs/gitops.md); the gates before decided as for a patch
            where = ", ".join(f"{w.repository}#{w.branch}" for w in written)
            return Decision(self.name, Verdict.GO, f"through Git: {where} ({owner} applies it)")
        return Decision.block(self.name, not_live(owner))
