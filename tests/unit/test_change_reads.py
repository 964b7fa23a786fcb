"""A whole change (``Applier.apply``) reads the tag's state and its targets' in one request, before
its promotion starts (``Targets.get_with_tag``), not the targets' after it: the interleavings of
test_drift, with the consumer's whole change as an actor (the read, the promotion's start, its
STARTED item, each target's claim, GET, claim read again, PATCH, finish) among the reconciler, the
verifier's rollbacks and people setting images, holding and releasing. Its invariants hold: tagpin
never patches over a hold, never holds what tagpin wrote; and every change read before it started
its promotion."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import rule, run_state_machine_as_test
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest
from tagpin.usecases.apply import Applier

from tests.unit.test_drift import APP, Interleavings, World

CHANGES = "change-"


def change(world: World, digest: str, observed_at: int) -> str:
    """The consumer's change of ``digest`` for both targets, as an actor."""
    actor = world._name(CHANGES.rstrip("-"))
    applier = Applier(
        followed=lambda: world.followed,
        state=world.baton.wrap_state(world.store, actor),
        workloads=world._clusters(actor),
        clock=world.clock,
    )
    move = Move(image=APP, digest=Digest(digest), observed_at=observed_at, trigger=Trigger.POLL)
    world.baton.start(actor, lambda: applier.apply(Change(move=move)))
    return actor


class WholeChanges(Interleavings):
    @rule()
    def a_change_arrives(self) -> None:
        """The changes queue delivers the tag's current digest (again, or late): the whole change."""
        tag = self.store.tags.get(APP)
        assert tag is not None
        change(self.world, tag.digest, tag.observed_at)

    def teardown(self) -> None:
        super().teardown()
        for actor in {a for a, _ in self.world.baton.log if a.startswith(CHANGES)}:
            calls = [c for a, c in self.world.baton.log if a == actor and c != "start"]
            if "DynamoPromotions.start" in calls:  # read first, in one request
                assert calls.index("DynamoTargets.get_with_tag") < calls.index("DynamoPromotions.start")
                assert "DynamoTargets.get_many" not in calls and "DynamoTags.get" not in calls, calls


def test_generated_interleavings_of_whole_changes(dynamodb: Any) -> None:
    WholeChanges.dynamodb = dynamodb
    run_state_machine_as_test(
        WholeChanges,
        settings=settings(
            max_examples=int(os.environ.get("TAGPIN_INTERLEAVINGS", "20")),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
