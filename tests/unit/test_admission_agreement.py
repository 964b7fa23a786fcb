"""The live path and explain agree: over generated situations (a newer or bad digest, a halted
promotion, an approval waiting or given, holds of every kind, a missing platform, an unsigned
digest under require or warn, a closed window, a full cluster, paused, hold and GitOps-owned
workloads, patch_live, a target already current, a target whose wave is not reached yet), what
``Admission.explain`` says first is what the consumer (``Applier.apply``) then does on that target.
One admission answers "would this roll?" for the dry run, ``tagpin plan`` and the console: if it
agrees with the consumer here, so do they."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from tagpin.domain.config import Cluster, FollowedImage, GitOpsSettings, RolloutSettings, Signatures, Target
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.domain.platforms import Platform
from tagpin.domain.signatures import SignatureMode
from tagpin.ports.registry import OCI_INDEX
from tagpin.ports.signatures import SignatureProblem, SignatureVerdict
from tagpin.ports.state import PromotionStatus, State, TargetStatus
from tagpin.ports.workloads import Workload
from tagpin.usecases.admission import GateName, Known, Verdict, standard
from tagpin.usecases.admission.platform import PlatformGate
from tagpin.usecases.admission.signature import SignatureGate
from tagpin.usecases.apply import Applier
from tagpin.usecases.apply_record import outcome_of
from tagpin.usecases.explain import explain_target
from tagpin.usecases.waves import plan

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0, D1, D2
from tests.support.registry import ScriptedRegistry
from tests.support.trail import end_promotion, start_promotion
from tests.unit.test_trust import PEM, FixedMaterial, ScriptedChecker, index

NOW = 1_800_000_000_000  # Friday 2027-01-15 08:00 UTC
OBSERVED = 1_000
NUMBERS = itertools.count()


@dataclass(frozen=True)
class Situation:
    superseded: bool
    bad: bool
    halted: bool
    approval: str  # "none", "waiting", "approved"
    hold: str | None  # None, "" (a person's, any digest), "this", "other", "lapsed"
    platform_missing: bool
    signature: SignatureMode | None  # the image's gate, and the digest is unsigned
    window_closed: bool
    cluster_full: bool
    paused: bool
    hold_annotation: bool
    owned: bool
    patch_live: bool
    current: bool
    applied_before: bool
    later_wave: bool = False  # the target is in a wave the promotion has not reached


rare = st.integers(0, 5).map(lambda n: n == 5)  # each stop now and then: most examples reach late gates
situations = st.builds(
    Situation,
    superseded=rare,
    bad=rare,
    halted=rare,
    approval=st.sampled_from(["none"] * 4 + ["waiting", "approved"]),
    hold=st.sampled_from([None] * 4 + ["", "this", "other", "lapsed"]),
    platform_missing=rare,
    signature=st.sampled_from([None] * 4 + [SignatureMode.REQUIRE, SignatureMode.WARN]),
    window_closed=rare,
    cluster_full=rare,
    paused=rare,
    hold_annotation=rare,
    owned=st.booleans(),
    patch_live=st.booleans(),
    current=rare,
    applied_before=st.booleans(),
    later_wave=rare,
)


def arrange(store: State, s: Situation) -> tuple[FollowedImage, Target, FakeClusters, ScriptedRegistry, str]:
    """A fresh image and cluster in ``store``, in situation ``s``."""
    n = next(NUMBERS)
    image, cluster = f"127.0.0.1:5000/demo/w{n}:stable", f"c{n}"
    target = Target(cluster=cluster, namespace="demo", name="web", container="app")
    signatures = None if s.signature is None else Signatures(mode=s.signature, keys=[{"pem": PEM}])
    followed = FollowedImage(
        image=image, targets=[target], approval=s.approval != "none", signatures=signatures
    )
    annotations = {"tagpin.dev/paused": "true"} if s.paused else {}
    annotations |= {"tagpin.dev/hold": "true"} if s.hold_annotation else {}
    labels = {"app.kubernetes.io/instance": "shop"} if s.owned else {}
    running = f"{image.removesuffix(':stable')}:stable@{D1 if s.current else D0}"
    fake = FakeCluster(
        [
            Workload(
                "1", {"app": running}, namespace="demo", name="web", labels=labels, annotations=annotations
            )
        ]
    )
    fake.node_platforms = (
        frozenset({Platform("linux", "amd64"), Platform("linux", "arm64")}) if s.platform_missing else None
    )
    registry = ScriptedRegistry()
    registry.manifests[f"127.0.0.1:5000/demo/w{n}@{D1}"] = (OCI_INDEX, index("linux/amd64"))

    if s.applied_before:  # tagpin rolled D0 there before
        store.targets.claim(target.id, image, D0, OBSERVED - 500, Trigger.POLL, NOW - 30)
        store.targets.finish(target.id, D0, TargetStatus.VERIFIED, NOW - 29, trigger=Trigger.VERIFY)
    store.tags.record(image, D1, OBSERVED, Trigger.POLL)
    if s.bad:
        store.tags.mark_bad(image, D1, "rolled back: ProgressDeadlineExceeded", NOW - 5)
    if s.superseded:
        store.tags.record(image, D2, OBSERVED + 1, Trigger.POLL)
    if s.halted or s.approval == "approved":
        start_promotion(store, image, D1, NOW - 10, observed_at=OBSERVED)
    if s.approval == "approved":
        store.promotions.request_approval(image, D1, 0, NOW - 9, NOW + 3600_000)
        store.promotions.decide_approval(image, D1, 0, True, NOW - 8, "approved by alice via cli")
    if s.halted:
        end_promotion(store, image, D1, PromotionStatus.HALTED, NOW - 7, "a rollout of it failed")
    if s.hold is not None:
        digest = {"": "", "this": D1, "other": D2, "lapsed": ""}[s.hold]
        until = NOW - 1 if s.hold == "lapsed" else None
        store.targets.hold(
            target.id, digest, NOW - 3, reason="held by alice", trigger=Trigger.MANUAL, until=until
        )
    if s.cluster_full:
        store.slots.acquire(cluster, f"{cluster}/demo/Deployment/api/app", D0, 1, NOW - 2, 10**12)
    return followed, target, FakeClusters(**{cluster: fake}), registry, running


def only(**changed: object) -> Situation:
    """A situation where only ``changed`` stands in the way (each gate is met at least once)."""
    calm: dict[str, object] = dict.fromkeys(Situation.__dataclass_fields__, False)
    calm |= {"approval": "none", "hold": None, "signature": None}
    return Situation(**(calm | changed))  # type: ignore[arg-type]


@example(s=only(window_closed=True))
@example(s=only(cluster_full=True))
@example(s=only(hold_annotation=True, applied_before=True))
@example(s=only(owned=True))
@example(s=only(signature=SignatureMode.WARN))
@example(s=only(hold="lapsed"))
@example(s=only(later_wave=True))
@example(s=only(later_wave=True, approval="approved"))
@example(s=only(later_wave=True, current=True))
@example(s=only(later_wave=True, hold="this"))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=situations)
def test_explain_says_first_what_the_consumer_then_does(store: State, s: Situation) -> None:
    followed, target, clusters, registry, running = arrange(store, s)
    windows = [{"clusters": [target.cluster], "days": ["sat"], "start": "02:00", "end": "04:00"}]
    first = [{"name": "first", "clusters": ["elsewhere"]}]  # a wave without this image's targets
    rollout = RolloutSettings.model_validate(
        {
            "maintenance_windows": windows if s.window_closed else [],
            "max_concurrent_per_cluster": 1,
            "waves": first if s.later_wave else [],
        }
    )
    gitops = GitOpsSettings.model_validate(
        {"patch_live": [f"{target.cluster}/demo/Deployment/web"] if s.patch_live else []}
    )
    checker = ScriptedChecker(SignatureVerdict(False, SignatureProblem.UNSIGNED, "no signature found"))
    admission = standard(
        state=store,
        settings=lambda: rollout,
        gitops=lambda: gitops,
        platforms=PlatformGate(
            registry, clusters, lambda: {target.cluster: Cluster(kubeconfig={"file": "k"})}, FakeClock(NOW)
        ),
        signatures=SignatureGate(lambda: checker, FixedMaterial, lambda: rollout),
    )
    change = Change(move=Move(image=followed.image, digest=D1, observed_at=OBSERVED, trigger=Trigger.POLL))

    waves = plan(rollout, [target])
    (wave,) = [w for w in waves if w.targets]
    known = Known(
        followed,
        wave,
        store.tags.get(followed.image),
        store.targets.get(target.id),
        store.promotions.get(followed.image),
        waves=tuple(waves),
    )
    explained = explain_target(admission, change.move, target, known, NOW, clusters)
    decision = explained.decision
    every = explain_target(admission, change.move, target, known, NOW, clusters, every=True)
    assert (every.decision.gate, every.decision.verdict) == (decision.gate, decision.verdict)

    applier = Applier(
        followed=lambda: {followed.image: followed},
        state=store,
        workloads=clusters,
        clock=FakeClock(NOW),
        settings=lambda: rollout,
        admission=admission,
    )
    results = applier.apply(change)
    if explained.current_already:  # nothing to roll: explain asks no gate, the consumer patches nothing
        event(f"current: {[r.outcome for r in results]}")
        assert ApplyOutcome.PATCHED not in [r.outcome for r in results]
        assert not clusters[target.cluster].patches
        return
    waits = any(d.verdict is Verdict.WAIT for d in explained.decisions)
    if waits and decision.gate not in (GateName.SUPERSEDED, GateName.BAD_DIGEST):
        # its wave is not reached: not touched, not reported (explain says what else would stop
        # it once the wave comes, or that it waits)
        event(f"wait: {decision.gate}")
        assert results == [] and not clusters[target.cluster].patches, (s, decision, results)
        return
    (result,) = results
    if decision.goes:
        expected = ApplyOutcome.PATCHED
    else:
        assert decision.gate is not None
        expected = outcome_of(decision)
    event(f"{decision.gate or 'go'}: {result.outcome}")
    assert result.outcome is expected, (s, decision, result)
    move_gate = decision.gate in (GateName.SUPERSEDED, GateName.BAD_DIGEST)
    assert (result.target is None) is move_gate  # the move's gates answer for the whole change
    if not decision.goes and decision.reason and expected is not ApplyOutcome.DEFERRED:
        assert decision.reason in (result.detail or result.error or ""), (decision, result)
    patched = clusters[target.cluster].patches
    assert bool(patched) is (result.outcome is ApplyOutcome.PATCHED)
    assert explained.current == running
