"""The other order of a digest failing while a consumer's PATCH of it is on its way to another target
(``test_rollback_during_patch`` is the first): the rollback (another target of the wave failed)
reads that target's workload before the PATCH lands, so it finds nothing to undo; the PATCH lands
and the consumer records ``applied``; only then does the rollback record its ``failed``. Before,
that ``failed`` was written over ``applied`` and the target kept running the bad digest, recorded
failed (the tag blocked, the reconciler never healed it). The rollback's ``failed`` is now written
only over the state its decision read; when the target moved on meanwhile, it decides again from
what the target runs now and puts the image back.

Two threads (the consumer's and the verifier's), the order forced by events: the verifier's read of
``api`` answers only once the consumer has recorded ``applied`` (its verification sent)."""

from __future__ import annotations

import threading
from typing import Any

from tagpin.domain.config import Kind
from tagpin.domain.outcomes import VerificationOutcome
from tagpin.ports.state import State
from tagpin.ports.workloads import ImageChange, Workload

from tests.support.cluster import FakeCluster
from tests.support.queues import ListVerificationQueue
from tests.unit.test_rollback_during_patch import API, WEB, assert_both_back, change, wire, workloads

WAIT_S = 10.0


class Steps:
    """The events that force the order, and what went wrong on the way (asserted empty)."""

    def __init__(self) -> None:
        self.api_patching = threading.Event()  # the consumer's PATCH of api is on its way
        self.read_api = threading.Event()  # the rollback has read api (not yet patched)
        self.api_applied = threading.Event()  # the consumer recorded api applied
        self.late: list[str] = []

    def wait(self, event: threading.Event, what: str) -> None:
        if not event.wait(WAIT_S):
            self.late.append(what)


class OrderedCluster(FakeCluster):
    """api's PATCH lands after the rollback's first read of api, which answers (what api ran before
    the PATCH) only once the consumer has recorded api applied."""

    steps: Steps
    verifier_thread: threading.Thread | None = None

    def get(self, namespace: str, kind: Kind, name: str) -> Workload:
        workload = super().get(namespace, kind, name)
        if (
            name == "api"
            and threading.current_thread() is self.verifier_thread
            and not self.steps.read_api.is_set()
        ):
            self.steps.read_api.set()
            self.steps.wait(self.steps.api_applied, "the consumer's applied")
        return workload

    def set_image(self, namespace: str, kind: Kind, name: str, change: ImageChange) -> None:
        ours = threading.current_thread() is not self.verifier_thread
        if name == "api" and ours and not self.steps.api_patching.is_set():
            self.steps.api_patching.set()
            self.steps.wait(self.steps.read_api, "the rollback's read of api")
        super().set_image(namespace, kind, name, change)


class Verifications(ListVerificationQueue):
    steps: Steps

    def send(self, verification: Any, delay_s: int) -> None:
        super().send(verification, delay_s)
        if verification.target_id == API.id:
            self.steps.api_applied.set()


def test_a_rollback_that_read_the_target_before_the_patch_landed_still_puts_it_back(store: State) -> None:
    steps = Steps()
    cluster = OrderedCluster(workloads())
    cluster.steps = steps
    verifications = Verifications()
    verifications.steps = steps
    verifier, applier = wire(store, cluster, verifications)
    outcomes: list[VerificationOutcome] = []

    def web_fails() -> None:  # web's verification, due while api's PATCH is on its way
        steps.wait(steps.api_patching, "api's PATCH")
        [(verification, _delay)] = [(v, d) for v, d in verifications.sent if v.target_id == WEB.id]
        outcomes.append(verifier.verify(verification).outcome)

    verifying = threading.Thread(target=web_fails)
    cluster.verifier_thread = verifying
    verifying.start()
    applier.apply(change(store))
    verifying.join(WAIT_S * 3)

    assert not steps.late, f"the order was not the one this test forces: {steps.late}"
    assert outcomes == [VerificationOutcome.ROLLED_BACK]
    assert_both_back(store, cluster)  # api: the bad digest that landed after the rollback's read too
