"""A person's change to a workload tagpin moved, told apart from tagpin's own writes.

The reconciler compares what each target runs with its tag's digest. A target tagpin had settled
at the tag's digest (``applied``, ``verified``) whose image is no longer the one tagpin wrote was
changed by someone else: a ``kubectl rollout undo``, an image set by hand (pinned to another
digest, unpinned, another repository's). It is held, not patched back, until the tag moves or
``tagpin release``. Holding by mistake stalls a rollout and tells people something false, so the
listing alone never decides: it was taken before the states were read, and tagpin's own patch may
have landed in between (the listing then still shows the old digest while the state already says
``applied``). A candidate is confirmed in three steps, each reading after the last:

1. **The workload is read again** (one GET, after its state was read). tagpin patches before it
   records ``applied``, so a state read as settled means the patch has landed and this read shows
   it: a target whose image is pinned to the tag's digest now was listed stale, and nothing is
   done. The decision is on the image in the spec, never on pods (they lag, disagree mid-rollout,
   or are none when scaled to zero): tagpin wrote ``<name>:<tag>@<digest>``.
2. **The tag is read again.** A rollback marks the digest bad before it restores the previous
   image; a restore this GET saw shows here as a blocked tag (tagpin's own write), or the tag moved.
3. **The hold is conditional on the state read in the first place** (same status, digest and
   ``updated_at``): a claim (tagpin patching again), an outcome or a rollback recorded since wins,
   and the next run decides again.

So every tagpin write to a workload is preceded by a state write this sequence reads after (a
claim, or the bad mark), and a listing older than tagpin's last write never counts as a person's
change. The other way round, a hold (this one, or ``tagpin hold``) written after the consumer or
the verifier read the target's state still wins: a claim is never taken over a live hold, and both
read the state again after each read of the workload, before they patch it. A settled target is
never "behind" here: held, stale, or left to the next run. ``tests/unit/test_drift.py`` generates
the interleavings of listing, patching, restoring, holding, state reads and a person's edits, and
checks exactly that.

A target moved through Git (its workload owned by Argo CD or Flux, docs/gitops.md) is ``applied``
once tagpin's commit is pushed, and runs the old image until the GitOps tool applies the commit:
while it is ``applied`` that is no person's change (the verifier follows it, and fails it when the
commit is not applied in time). Once ``verified``, another image is someone's, as for any target.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from tagpin.domain.channels import repository_of
from tagpin.domain.config import FollowedImage, GitOpsSettings
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest, ImageRef, InvalidReference
from tagpin.ports.notify import RolloutEventKind
from tagpin.ports.state import (
    SETTLED,
    ImageEvent,
    State,
    TagState,
    TargetState,
    TargetStatus,
)
from tagpin.ports.workloads import Inventory, NotFound, WorkloadError
from tagpin.usecases.audit import Audit
from tagpin.usecases.running import Observed

logger = logging.getLogger(__name__)


class Drift(StrEnum):
    """What a second look says about a target listed off its tag's digest."""

    PERSON = "person"  # its image is not the one tagpin wrote, and nothing tagpin did explains it: hold
    STALE = "stale"  # its image is pinned to the tag's digest: the listing predates tagpin's own write
    UNDECIDED = "undecided"  # not now: unreachable, gone, paused, the tag moved or was marked bad


@dataclass(frozen=True)
class Verdict:
    drift: Drift
    image: str | None = None  # the container's image as the second read found it
    why: str = ""


class PeopleFirst:
    """The reconciler's respect for people: held targets stay where they are (a hold that has ended
    is released first), and a person's change is held, confirmed as the module says."""

    def __init__(
        self,
        state: State,
        clusters: Callable[[str], Inventory],
        audit: Audit,
        clock: Callable[[], int],
        gitops: Callable[[], GitOpsSettings] = GitOpsSettings,
    ) -> None:
        self._state = state
        self._clusters = clusters
        self._audit = audit
        self._clock = clock
        self._gitops = gitops

    def behind(
        self, behind: list[Observed], followed: FollowedImage, tag: TagState, run_id: str
    ) -> tuple[list[Observed], list[str]]:
        """(the targets really behind, the targets put on hold now). A target tagpin settled at
        the tag's digest is never behind: a person changed it (held), or the listing was stale, or
        it is decided by the next run."""
        if not behind:
            return behind, []
        now = self._clock()
        states = self._state.targets.get_many([o.target.id for o in behind])
        really: list[Observed] = []
        held: list[str] = []
        for seen in behind:
            known = states.get(seen.target.id)
            if known is not None and known.status is TargetStatus.HELD and known.held_digest is not None:
                if known.holds(tag.digest, now):
                    continue
                if known.held_until is not None and known.held_until <= now:
                    self._state.targets.release(
                        seen.target.id, now, reason="the hold ended", trigger=Trigger.RECONCILE
                    )
            elif known is not None and known.status in SETTLED and known.settled_at(tag.digest):
                verdict = self.recheck(seen, tag, known)
                if verdict.drift is Drift.PERSON and self._hold(seen, known, verdict, followed, tag, run_id):
                    held.append(seen.target.id)
                continue
            really.append(seen)
        return really, held

    def recheck(self, seen: Observed, tag: TagState, known: TargetState | None = None) -> Verdict:
        """Steps 1 and 2: the workload, then the tag, read again. The decision is on the image in
        the workload's spec, never on its pods: tagpin wrote ``<name>:<tag>@<digest>`` when it
        settled the target, so an image pinned to another digest, an unpinned one (whatever its
        pods run, or none: scaled to zero) or another repository's is someone else's write."""
        target = seen.target
        try:
            workload = self._clusters(target.cluster).get(target.namespace, target.kind, target.name)
        except NotFound:
            return Verdict(Drift.UNDECIDED, why="the workload is gone")
        except WorkloadError as exc:  # unreachable, forbidden, 5xx: the next run decides
            return Verdict(Drift.UNDECIDED, why=f"{type(exc).__name__}: {exc}")
        if workload.paused or workload.held:
            return Verdict(Drift.UNDECIDED, why="paused or held by annotation")
        image = workload.image_of(target.container)
        if image is None:
            return Verdict(Drift.UNDECIDED, why=f"no container {target.container!r}")
        if _pinned_to(image, repository_of(seen.image)) == tag.digest:
            return Verdict(Drift.STALE, image, "listed before tagpin's own patch")
        if (
            known is not None
            and known.status is TargetStatus.APPLIED
            and self._gitops().owner_of(workload.labels, workload.annotations) is not None
        ):
            return Verdict(
                Drift.UNDECIDED, image, "moved through Git: the GitOps tool has not applied it yet"
            )
        now_tag = self._state.tags.get(seen.image)
        if now_tag is None or now_tag.digest != tag.digest or now_tag.blocked:
            return Verdict(Drift.UNDECIDED, image, "the tag moved or its digest was marked bad")
        return Verdict(Drift.PERSON, image)

    def _hold(
        self,
        seen: Observed,
        known: TargetState,
        verdict: Verdict,
        followed: FollowedImage,
        tag: TagState,
        run_id: str,
    ) -> bool:
        """Step 3: held, recorded and announced once, unless the state changed since it was read."""
        now = self._clock()
        target_id = seen.target.id
        reason = (
            f"runs {_shown(verdict.image)} instead of {tag.digest}, which tagpin applied: changed outside "
            "tagpin (a rollout undone, an image set by hand); held until the tag moves or "
            "`tagpin release`"
        )
        move = Move(
            image=followed.image,
            digest=Digest(tag.digest),
            observed_at=tag.observed_at,
            trigger=Trigger.RECONCILE,
            correlation_id=run_id,
        )
        # The hold and the image's HELD item: one write. A process that dies after it leaves both,
        # and the next run finds the target held (nothing more to do); the announcement follows
        # the write, once: only one run's hold is written (its condition).
        held = self._audit.item(move, ImageEvent.HELD, now, detail=f"{target_id}: {reason}")
        if not self._state.targets.hold(
            target_id, tag.digest, now, reason=reason, trigger=Trigger.RECONCILE, if_still=known, event=held
        ):
            return False
        self._audit.announce(move, RolloutEventKind.HELD, now, targets=[target_id])
        logger.info("target held: changed outside tagpin", extra={"target": target_id})
        return True


def _pinned_to(image: str, followed: ImageRef) -> str | None:
    """The digest ``image`` is pinned to, when it names the followed repository."""
    try:
        ref = ImageRef.parse(image)
    except InvalidReference:
        return None
    return ref.digest if ref.name == followed.name else None


def _shown(image: str | None, limit: int = 300) -> str:
    """A cluster's text in tagpin's own words: bounded (it is stored and announced)."""
    text = image or "?"
    return text if len(text) <= limit else text[:limit] + "…"
