"""A whole change (``Applier.apply``) reads the tag's state and its targets' in one request, before
its promotion starts (``Targets.get_with_tag``), not the targets' after it: the interleavings of
test_drift, with the consumer's whole change as an actor (the read, the promotion's start, its
STARTED item, each target's claim, GET, claim read again, PATCH, finish) among the reconciler, the
verifier's rollbacks and people setting images, holding and releasing. Its invariants hold: tagpin
never patches over a hold, never holds what tagpin wrote; and every change read before it started
its promotion; its STARTED item is written with the promotion's start, in one transaction."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis.stateful import rule
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.domain.refs import Digest
from tagpin.usecases.apply import Applier

from tests.support.aws import create_table
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0
from tests.support.interleave import run_interleavings
from tests.unit.conftest import SerializedClient
from tests.unit.test_drift import APP, DIGESTS, NAMES, Interleavings, World

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
            writes = [i for i, c in enumerate(calls) if c.split(".")[1] in ("claim", "finish", "note")]
            if "DynamoPromotions.start" in calls and writes:  # STARTED (the start's) before any record
                assert calls.index("DynamoPromotions.start") < writes[0], calls


def test_generated_interleavings_of_whole_changes(dynamodb: Any) -> None:
    WholeChanges.dynamodb = dynamodb
    run_interleavings(WholeChanges, examples=20, steps=30)


class StartedWriteFails:
    """The state table's client, but the first request that writes a STARTED history item fails
    (the connection lost as it was sent): what was written with it in one request is not written."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.failed = 0

    def __getattr__(self, attribute: str) -> Any:
        call = getattr(self._client, attribute)
        if attribute not in ("put_item", "transact_write_items"):
            return call

        def failing(**request: Any) -> Any:
            if not self.failed and '"started"' in json.dumps(request):
                self.failed += 1
                raise ClientError({"Error": {"Code": "InternalServerError", "Message": "lost"}}, attribute)
            return call(**request)

        return failing


def test_a_promotion_starts_with_its_started_item_or_not_at_all(dynamodb: Any) -> None:
    """The promotion's start and its STARTED history item are one write (both or neither): a change
    whose write of the item fails has started nothing, and its retry starts the promotion with its
    item. (Two writes before: the retry found the promotion started and never wrote the item.)"""
    world = World(dynamodb)
    world.applied(D0)
    moved = world.store.tags.record(APP, DIGESTS[1], world.clock(), Trigger.POLL)
    table = f"started-{uuid.uuid4().hex[:8]}"
    create_table(dynamodb, table, ("pk", "sk"))
    client = StartedWriteFails(SerializedClient(dynamodb))
    store = dynamodb_state(client, table)  # type: ignore[arg-type]
    store.tags.record(APP, DIGESTS[1], moved.current.observed_at, Trigger.POLL)
    applier = Applier(
        followed=lambda: world.followed,
        state=store,
        workloads=FakeClusters(east=FakeCluster(world.cluster.items.values())),
        clock=world.clock,
    )
    move = Move(
        image=APP, digest=Digest(DIGESTS[1]), observed_at=moved.current.observed_at, trigger=Trigger.POLL
    )
    with pytest.raises(ClientError):
        applier.apply(Change(move=move))
    assert client.failed == 1
    assert store.promotions.get(APP) is None and store.history.of_image(APP) == []
    results = applier.apply(Change(move=move))  # the queue's retry
    assert [r.outcome for r in results] == [ApplyOutcome.PATCHED] * len(NAMES)
    promotion = store.promotions.get(APP)
    assert promotion is not None and promotion.digest == DIGESTS[1]
    events = sorted(str(e.event) for e in store.history.of_image(APP))
    assert events == ["applied", "started"], events
