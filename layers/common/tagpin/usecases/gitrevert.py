"""Revert through Git (docs/gitops.md): the verifier's side of the write-back.

A target moved by a commit (its workload owned by Argo CD or Flux, ``gitops.write_back``
configured) is verified like a patched one, except that the workload reaches the digest only
once the GitOps tool applies the commit: until ``rollout.verify_timeout_seconds`` the verifier
waits for that (``waiting``). When the rollout fails, or the tool never applies the commit in
time, the digest is marked bad as for any target, and instead of a live patch (which the tool
would revert) the reference the workload ran before is written back through Git
(``GitRoute.revert``); the write-back function's commit then records the target ``rolled_back``.
"""

from __future__ import annotations

from collections.abc import Callable

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import GitOpsSettings, Target
from tagpin.domain.refs import ImageRef, InvalidReference
from tagpin.ports.state import TargetState
from tagpin.ports.workloads import NotFound, Workloads
from tagpin.usecases.admission.owner import live_owner, not_live
from tagpin.usecases.gitroute import GitRoute


class GitReverts:
    def __init__(self, gitops: Callable[[], GitOpsSettings], route: GitRoute) -> None:
        self._gitops = gitops
        self._route = route

    def restore(
        self,
        workloads: Workloads,
        target: Target,
        st: TargetState,
        image: FollowedKey,
        why: str,
        correlation_id: str | None,
    ) -> str | None:
        """None: no GitOps tool owns the workload, it is restored live as any other. Else why it
        is not restored live: a revert was sent to Git, or there is nothing to write back."""
        gitops = self._gitops()
        try:
            workload = workloads.get(target.namespace, target.kind, target.name)
        except NotFound:
            return None
        owner = live_owner(gitops, workload, target.id)
        if owner is None:
            return None
        if not gitops.for_target(image, target.id):
            return f"not rolled back: {not_live(owner)}"
        previous = st.previous_image
        if not _tagged(previous):
            return (
                f"not rolled back through Git: the reference it ran before ({previous or 'unknown'}) "
                "names no tag to write back; the digest is marked bad, so nothing more is written "
                "until the tag moves"
            )
        assert previous is not None
        self._route.revert(image, st.digest, target.id, previous, st.observed_at, why, correlation_id)
        return f"reverting through Git to {previous}: {why}"


def _tagged(reference: str | None) -> bool:
    """A reference a revert can write: a tag, with its digest (``repo:1.4@sha256:...``) or without
    (``repo:1.4``, the floating tag the file named before tagpin pinned it: written back as it
    was, the digest fields tagpin added taken out)."""
    if not reference:
        return False
    try:
        ref = ImageRef.parse(reference)
    except InvalidReference:
        return False
    return ref.tag is not None
