"""A person's change to a workload tagpin moved, told apart from tagpin's own writes.

The reconciler compares what each target runs with its tag's digest. A target tagpin had settled
at the tag's digest (``applied``, ``verified``) that now runs another digest was changed by a
person (a ``kubectl rollout undo``, an image set by hand): it is held, not patched back, until the
tag moves or ``tagpin release``. Holding by mistake stalls a rollout and tells people something
false, so the listing alone never decides: it was taken before the states were read, and tagpin's
own patch may have landed in between (the listing then still shows the old digest while the state
already says ``applied``). A candidate is confirmed in three steps, each reading after the last:

1. **The workload is read again** (one GET, after its state was read). tagpin patches before it
   records ``applied``, so a state read as settled means the patch has landed and this read shows
   it: a target that runs the tag's digest now was listed stale, and nothing is done.
2. **The tag is read again.** A rollback marks the digest bad before it restores the previous
   image; a restore this GET saw shows here as a blocked tag (tagpin's own write), or the tag moved.
3. **The hold is conditional on the state read in the first place** (same status, digest and
   ``updated_at``): a claim (tagpin patching again), an outcome or a rollback recorded since wins,
   and the next run decides again.

So every tagpin write to a workload is preceded by a state write this sequence reads after (a
claim, or the bad mark), and a listing older than tagpin's last write never counts as a person's
change. ``tests/unit/test_drift.py`` generates the interleavings of listing, patching, restoring,
state reads and a person's edits, and checks exactly that.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from tagpin.domain.channels import repository_of
from tagpin.domain.config import FollowedImage
from tagpin.domain.messages import Trigger
from tagpin.ports.notify import RolloutEventKind
from tagpin.ports.state import ImageEvent, State, TagState, TargetState, TargetStatus
from tagpin.ports.workloads import Inventory, NotFound, WorkloadError
from tagpin.usecases.audit import Audit
from tagpin.usecases.running import Observed, running_digest

logger = logging.getLogger(__name__)


class Drift(StrEnum):
    """What a second look says about a target listed off its tag's digest."""

    PERSON = "person"  # it still runs another digest, and nothing tagpin wrote explains it: hold
    STALE = "stale"  # it runs the tag's digest: the listing predates tagpin's own write
    UNKNOWN = "unknown"  # what it runs cannot be told now (pods disagree): behind, as any unknown
    UNDECIDED = "undecided"  # not now: unreachable, gone, paused, the tag moved or was marked bad


@dataclass(frozen=True)
class Verdict:
    drift: Drift
    running: str | None = None
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
    ) -> None:
        self._state = state
        self._clusters = clusters
        self._audit = audit
        self._clock = clock

    def behind(
        self, behind: list[Observed], followed: FollowedImage, tag: TagState, run_id: str
    ) -> tuple[list[Observed], list[str]]:
        """(the targets really behind, the targets put on hold now)."""
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
            elif known is not None and known.settled_at(tag.digest) and seen.running is not None:
                verdict = self.recheck(seen, tag)
                if verdict.drift is Drift.PERSON and self._hold(seen, known, verdict, followed, tag, run_id):
                    held.append(seen.target.id)
                if verdict.drift is not Drift.UNKNOWN:
                    continue
            really.append(seen)
        return really, held

    def recheck(self, seen: Observed, tag: TagState) -> Verdict:
        """Steps 1 and 2: the workload, then the tag, read again."""
        target = seen.target
        try:
            inventory = self._clusters(target.cluster)
            workload = inventory.get(target.namespace, target.kind, target.name)
            if workload.paused or workload.held:
                return Verdict(Drift.UNDECIDED, why="paused or held by annotation")
            running, how = running_digest(
                workload,
                target.container,
                repository_of(seen.image),
                lambda: list(inventory.pods(target.namespace)),
            )
        except NotFound:
            return Verdict(Drift.UNDECIDED, why="the workload is gone")
        except WorkloadError as exc:  # unreachable, forbidden, 5xx: the next run decides
            return Verdict(Drift.UNDECIDED, why=f"{type(exc).__name__}: {exc}")
        if running == tag.digest:
            return Verdict(Drift.STALE, running, "listed before tagpin's own patch")
        if running is None:
            return Verdict(Drift.UNKNOWN, None, how)
        now_tag = self._state.tags.get(seen.image)
        if now_tag is None or now_tag.digest != tag.digest or now_tag.blocked:
            return Verdict(Drift.UNDECIDED, running, "the tag moved or its digest was marked bad")
        return Verdict(Drift.PERSON, running, how)

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
            f"runs {verdict.running} instead of {tag.digest}, which tagpin applied: changed outside "
            "tagpin (a rollout undone, an image set by hand); held until the tag moves or "
            "`tagpin release`"
        )
        if not self._state.targets.hold(
            target_id, tag.digest, now, reason=reason, trigger=Trigger.RECONCILE, if_still=known
        ):
            return False
        self._audit.record(
            followed.image,
            tag.digest,
            ImageEvent.HELD,
            now,
            once=f"held_{target_id}",
            detail=f"{target_id}: {reason}",
            trigger=Trigger.RECONCILE,
            correlation_id=run_id,
            announce=RolloutEventKind.HELD,
            targets=[target_id],
        )
        logger.info("target held: changed outside tagpin", extra={"target": target_id})
        return True
