"""A hold that lands while the consumer patches, and a consumer that stops before it puts the image back.

A person's hold is a row in the state table; the consumer's patch is a write to the Kubernetes API.
The consumer reads its claim again before the PATCH and writes ``applied`` after it only while the
claim is still ``pending``: a hold written in between makes it put back the image the container ran
(``tagpin.usecases.apply_target``). If the consumer stops after its PATCH and before that put-back
(a timeout, a crash), the retried message finds the target held and does nothing, as for every
held target: the workload would keep the new digest under a hold asked while it ran the old one.

The rule, for the consumer and for this module alike: a digest runs on a target, as tagpin and a
person see it, once tagpin has recorded it ``applied``; until then **a hold written over a claim
stops every move in flight**: the patches of the claims made since the last outcome recorded are
undone, back to the image the first of them replaced, and nothing else is (the consumer puts back
when ``TargetState.interrupts`` its claim). An older digest's PATCH that lands after a person held
over a newer claim is undone too: its consumer read its claim before the newer one replaced it.

Three facts settle it, each written by a write that happens anyway (no request added to a change):

- **The claims in flight** (``claims``: a number set of claim times). Each claim adds its time (a
  deferral's adds nothing: it patches nothing); an outcome that records what the target runs
  (``ENDS_MOVES``), a hold and a removal end them; a failure does not (it records only that its own
  claim did not patch). Past ``CLAIMS_KEPT``, the consumer drops those too old to patch. Times name
  claims, so two consumers whose clocks or requests cross still tell theirs apart.
- **The hold keeps what it was written over** (``held_over``, ``held_over_at``,
  ``held_over_claims``: the status, ``updated_at`` and claims its own conditional write replaced,
  copied by that write). Written over a claim (``pending``), those are the claims whose patches it
  stops (``TargetState.stopped_claims``). A release of such a hold leaves the target ``pending`` with
  the claims as they were, so a hold written again while they are in flight is over them too.
- **The patch keeps what to put back** (``tagpin.dev/replaced`` on the pod template, in the same
  PATCH as the image: ``{container: {"image": <the image to put back>, "claim": <the claim's
  time>}}``): the image it replaced, or, over the patch of an earlier claim in flight, the image
  that one kept. The workload shows a claim's patch exactly while its container is pinned to the
  digest ``tagpin.dev/digests`` names (a put-back, a rollback or ``kubectl rollout undo`` rewrites
  it) and the annotation names that claim.

The reconciler settles each hold that stops claims (``InterruptedPatches.settle``, every run): the
workload is read and, if it shows the patch of a claim the hold stops, the image kept is put back
(with the workload's ``resourceVersion``, the hold read again after each read of the workload, as
the rollback's ``restore`` does). Put back or not, the workload is read again next run until the
claims are older than any invocation can be (``CLAIM_LIFETIME_MS``): a consumer that made one may
still be on its way to its PATCH (and a release gives the claims back to the target, for a hold
written again); after that nothing can land under them, and the hold forgets them. Once
forgotten, nothing is put back again, so a person's own later edit (even back to that digest)
stands.

Why not the retried message (the consumer finding its own claim held): the message may never come
back (dead-lettered, superseded by a newer digest, the hold released first), the claim's item no
longer knows the image the workload ran (the claim overwrote the settled digest, and
``previous_image`` is what the patch before replaced), and a hold written over an ``applied`` target
looks the same as one written over the claim, unless the hold keeps what it replaced. The
reconciler runs whatever became of the message, and reads the workload anyway.

Not closed: between the PATCH and the put-back the workload's controller has seen the new template
(docs/rollouts.md); here that window lasts until the next reconcile run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from tagpin.domain.annotations import (
    ANNOTATION_DIGESTS,
    ANNOTATION_REPLACED,
    json_note,
)
from tagpin.domain.config import Kind, Target
from tagpin.domain.moves import Trigger
from tagpin.domain.outcomes import RestoreOutcome
from tagpin.domain.refs import Digest
from tagpin.ports.state import State, TargetState
from tagpin.ports.targets import TargetNote
from tagpin.ports.workloads import ImageChange, NotFound, Workload, WorkloadError, Workloads
from tagpin.usecases.patch import image_back, patch_with_retries

logger = logging.getLogger(__name__)

# Longer than any invocation that may still patch under a claim: Lambda's limit (15 minutes) and the
# API server's request timeout (60 s) for a PATCH sent just before it.
CLAIM_LIFETIME_MS = 16 * 60 * 1000
HOLDS_READ = 1000  # holds looked at per run (the HOLDS hints, one Query)
# Claims in flight kept before the old ones are dropped: each claim that records no outcome adds one
# (a consumer that dies, delivered again; the reconciler's healing change of a target it cannot
# patch), and the item's size is what each write of it costs.
CLAIMS_KEPT = 32


def replaced(workload: Workload, container: str, image: str, claimed_at: int) -> dict[str, str]:
    """The ``tagpin.dev/replaced`` annotation of a patch of ``container``, made under the claim of
    ``claimed_at``, whose put-back is ``image`` (the consumer writes it with the image)."""
    notes = _notes(workload)
    notes[container] = {"image": image, "claim": claimed_at}
    return {ANNOTATION_REPLACED: json.dumps(notes, sort_keys=True, separators=(",", ":"))}


def undoes(workload: Workload, container: str, image: str, claims: frozenset[int]) -> str:
    """What a hold over a claim puts back once its patch replaced ``image``: the image the first
    patch of the moves in flight replaced (over a patch of one of ``claims``, none recorded: the
    image its note keeps), else ``image``."""
    return patched_under(workload, container, claims) or image


def note_put_back(
    state: State, target_id: str, digest: Digest, image: str, now: int, trigger: Trigger
) -> None:
    """The target's history item of a put-back (``TargetNote.PUT_BACK``): which image went back on
    over ``digest``, so the trail shows what the workload ran and why (the consumer's own put-back
    and the reconciler's write the same item; a log line alone is gone with its retention)."""
    state.targets.note(
        target_id,
        digest,
        TargetNote.PUT_BACK,
        now,
        f"a hold landed during the patch; {image} put back",
        trigger,
    )


def forget_old_claims(state: State, claim: TargetState, now: int) -> None:
    """Past ``CLAIMS_KEPT`` claims in flight, those too old to patch any more are dropped (their
    consumers are gone; a patch of this claim keeps what theirs replaced, read before)."""
    if len(claim.claims) > CLAIMS_KEPT:
        old = frozenset(c for c in claim.claims if c + CLAIM_LIFETIME_MS <= now)
        state.targets.forget_claims(claim.target_id, old)


def released_since(state: State, target_id: str, claimed_at: int) -> RestoreOutcome | None:
    """A put-back of the patch of the claim of ``claimed_at`` (the consumer's and the reconciler's)
    reads the hold again after each read of the workload: ``RELEASED`` once the target is no longer
    held over moves in flight that include that claim (released, or settled by another since), and
    nothing is put back; else None. Read in a call of its own before the PATCH: a release between
    the two is not seen."""
    now = state.targets.get(target_id)
    return None if now is not None and now.interrupts(claimed_at) else RestoreOutcome.RELEASED


def patched_under(workload: Workload, container: str, claims: frozenset[int]) -> str | None:
    """The image to put back if the workload still shows a patch of ``container`` made under one of
    ``claims`` (its image pinned to the digest tagpin's notes name, its ``tagpin.dev/replaced``
    note naming that claim): the image that note kept; else None."""
    image = workload.image_of(container)
    digest = json_note(workload.template_annotations.get(ANNOTATION_DIGESTS)).get(container)
    if image is None or not isinstance(digest, str) or not digest or not image.endswith("@" + digest):
        return None
    note = _notes(workload).get(container)
    if not isinstance(note, dict):
        return None
    claim = note.get("claim")
    if not isinstance(claim, int) or isinstance(claim, bool) or claim not in claims:
        return None
    previous = note.get("image")
    return previous if isinstance(previous, str) and previous and previous != image else None


class InterruptedPatches:
    """The reconciler's part: every hold written over a claim is settled (the module says how)."""

    def __init__(self, state: State, clusters: Callable[[str], Workloads], clock: Callable[[], int]) -> None:
        self._state = state
        self._clusters = clusters
        self._clock = clock

    def settle(self) -> list[str]:
        """Settle the holds written over a claim; the targets whose image was put back."""
        now = self._clock()
        put_back: list[str] = []
        for held in self._state.targets.held(HOLDS_READ, now):
            stopped = held.stopped_claims()
            if not stopped:
                continue
            newest = max(stopped)
            image: list[tuple[Digest, str]] = []  # the digest taken off and the image put back, if one was
            try:
                outcome = self._put_back(held, newest, image)
            except NotFound:  # the workload is gone: nothing to put back
                outcome = RestoreOutcome.NO_PREVIOUS
            except (WorkloadError, ValueError) as exc:  # unreachable, 5xx, a kind unknown here: next run
                logger.warning(
                    "hold over a claim not settled", extra={"target": held.target_id, "error": str(exc)}
                )
                continue
            if outcome is RestoreOutcome.RELEASED:  # or settled by another run, since it was read
                continue
            if outcome is RestoreOutcome.RESTORED:
                put_back.append(held.target_id)
                taken, back = image[-1]
                note_put_back(self._state, held.target_id, taken, back, now, Trigger.RECONCILE)
                logger.warning(
                    "a hold landed while tagpin patched: the image the workload ran is put back",
                    extra={"target": held.target_id, "digest": taken},
                )
            # Another claim's consumer may still patch (put back or not, so far): the claims are
            # kept, and the workload looked at again next run, until they are too old to patch.
            if (
                outcome in (RestoreOutcome.NOT_RUNNING, RestoreOutcome.RESTORED)
                and newest + CLAIM_LIFETIME_MS > now
            ):
                continue
            self._state.targets.interruption_settled(held.target_id, held.held_over_at or 0)
        return put_back

    def _put_back(
        self, held: TargetState, claimed_at: int, image: list[tuple[Digest, str]]
    ) -> RestoreOutcome:
        """Put back the image the patches of the moves in flight replaced, if the workload shows
        one of them (what is sent is appended to ``image``: a PATCH retried after a conflict sends
        it again)."""
        cluster, namespace, kind, name, container = held.target_id.split("/")
        target = Target(cluster=cluster, namespace=namespace, kind=Kind(kind), name=name, container=container)

        def step(workload: Workload) -> tuple[RestoreOutcome, ImageChange | None]:
            released = released_since(self._state, held.target_id, claimed_at)
            if released is not None:
                return released, None
            previous = patched_under(workload, target.container, held.stopped_claims())
            if previous is None:
                return RestoreOutcome.NOT_RUNNING, None
            if workload.manages_own_rollback:  # as the consumer's own put-back (patch.restore)
                return RestoreOutcome.LEFT_TO_ARGO, None
            taken = Digest((workload.image_of(target.container) or "").rpartition("@")[2])
            change = image_back(workload, target.container, previous, taken, self._clock())
            image.append((taken, previous))
            return RestoreOutcome.RESTORED, change

        return patch_with_retries(
            self._clusters(target.cluster), target.kind, target.namespace, target.name, step, target.id
        )


def _notes(workload: Workload) -> dict[str, Any]:
    return json_note(workload.template_annotations.get(ANNOTATION_REPLACED))
