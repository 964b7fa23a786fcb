"""Admission: the one place that decides whether a move may start on a target now.

Every gate answers with one ``Decision`` (go, defer for how long and why, block and why (transient
or not), await approval) through one method (``decide``); ``Admission`` asks them in this order,
and the first that does not let the move go decides:

the move as a whole (``Stage.MOVE``: once per change, before its promotion starts)
 1. superseded   a newer digest of the tag was seen, or holds the promotion  (superseded.py)
 2. bad-digest   the digest is marked bad, or its promotion was halted       (bad_digest.py)
each target's wave (``Stage.WAVE``: before anything of the target is read)
 3. wave         its wave is not reached yet: waits for the wave before it   (wave.py)
each target, before it is claimed (``Stage.TARGET``)
 4. approval     its wave waits for a person's approval                       (approval.py)
 5. hold         a person holds it (``tagpin hold``, the console, a manual change)  (hold.py)
 6. platform     the image lacks a platform its cluster runs                  (platform.py)
 7. signature    no signature its gate trusts; ``warn`` lets it go, recorded   (signature.py)
 8. window       outside its maintenance window: deferred until one opens     (window.py)
 9. slot         its cluster has max_concurrent_per_cluster rollouts: deferred (slot.py)
each target's workload, as the patch step reads it (``Stage.WORKLOAD``)
10. paused       annotated tagpin.dev/paused                                  (paused.py)
11. hold         annotated tagpin.dev/hold                                    (hold.py)
12. owner        Argo CD or Flux owns it and gitops.patch_live does not name it  (owner.py)

Who asks: the consumer (``tagpin.usecases.apply``: ``decide_move``, then ``decide`` per stage, and
records the answer once: ``tagpin.usecases.apply_record``); and every "would this roll?" through
``explain`` (every gate's decision, nothing changed): the dry run (``rollout.dry_run``),
``tagpin plan`` and the console's target page (``tagpin.usecases.explain``). A new gate is a file
here and a line in ``standard``; it then shows up in all of them.

Gates are asked lazily: none after the first stop (a deferred target takes no slot, a held one asks
no registry). The live path asks the slot gate to take a slot; explain only counts. A gate whose
input was not read where it is asked (the console reads no workload and no registry) answers
``unknown``.
"""

from tagpin.usecases.admission.admission import Admission, Unavailable, first_stop, standard
from tagpin.usecases.admission.decision import Decision, Gate, GateName, Known, MoveGate, Stage, Verdict

__all__ = [
    "Admission",
    "Decision",
    "Gate",
    "GateName",
    "Known",
    "MoveGate",
    "Stage",
    "Unavailable",
    "Verdict",
    "first_stop",
    "standard",
]
