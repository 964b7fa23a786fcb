"""History items written in the same millisecond each keep their own item (against moto's DynamoDB).

A round of the consumer decides all its targets at one ``now``: each target's decision on the image's
trail (``unverified``, ``deferred``, ``blocked``) has the same time, digest and event, and its key
(``HIST#<ms>#<digest prefix>#<event>``) was the same, so each PutItem replaced the one before and
the console's timeline showed the last target only. The key now ends with a hash of what the item
says (``tagpin.adapters.dynamodb.history``): different items never share a key, the same item
written again (a retried request) still replaces itself, and items stored before still read."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, cast

import pytest
from tagpin import wiring
from tagpin.adapters.dynamodb.table import Table
from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import parse_config
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.domain.refs import Digest
from tagpin.ports.signatures import SignatureProblem, SignatureVerdict
from tagpin.ports.state import ImageEvent, ImageEventRecord, State, TargetNote
from tagpin.ports.workloads import Workload
from tagpin.usecases.admission import standard
from tagpin.usecases.apply import Applier

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.console import IMAGE, World, make_world
from tests.support.constants import D0, D1, STATE_TABLE
from tests.unit.test_rollout import change
from tests.unit.test_trust import PEM, ScriptedChecker, signature_gate

NOW = 1_800_000_000_000
TARGET_ID = "prod/web/Deployment/web/web"
WEB = cast(FollowedKey, IMAGE)
DIGEST = cast(Digest, D1)


def unverified(detail: str, at: int = NOW) -> ImageEventRecord:
    return ImageEventRecord(WEB, DIGEST, ImageEvent.UNVERIFIED, at, detail=detail)


def test_two_image_events_of_one_millisecond_are_both_kept(store: State) -> None:
    store.history.record(unverified("prod/web/Deployment/web/web: signature: wrong-key"))
    store.history.record(unverified("prod/web/Deployment/api/web: signature: wrong-key"))
    details = sorted(e.detail or "" for e in store.history.of_image(WEB))
    assert details == [
        "prod/web/Deployment/api/web: signature: wrong-key",
        "prod/web/Deployment/web/web: signature: wrong-key",
    ]


def test_two_notes_of_a_target_in_one_millisecond_are_both_kept(store: State) -> None:
    for detail in ("outside the window mon-fri 09:00-17:00", "wave canary not verified yet"):
        store.targets.note(TARGET_ID, DIGEST, TargetNote.DEFERRED, NOW, detail, Trigger.POLL)
    assert sorted(e.detail or "" for e in store.history.of_target(TARGET_ID)) == [
        "outside the window mon-fri 09:00-17:00",
        "wave canary not verified yet",
    ]


def test_the_same_item_written_again_is_still_one_item(store: State) -> None:
    """A retried request (botocore's, a transaction's) writes the item it wrote: no second entry."""
    for _ in range(2):
        store.history.record(unverified("prod/web/Deployment/web/web: signature: wrong-key"))
        store.targets.note(TARGET_ID, DIGEST, TargetNote.DEFERRED, NOW, "outside the window", Trigger.POLL)
    assert len(store.history.of_image(WEB)) == 1 and len(store.history.of_target(TARGET_ID)) == 1


def test_items_stored_before_read_with_the_new_ones_newest_first(
    store: State, dynamodb: Any, state_table: str
) -> None:
    """An item of the former key (no hash) is read as it was, in time order with the new ones."""
    old = {
        "pk": {"S": f"IMAGE#{IMAGE}"},
        "sk": {"S": f"HIST#{NOW:013d}#{D1[7:19]}#unverified"},
        "digest": {"S": D1},
        "event": {"S": "unverified"},
        "at": {"N": str(NOW)},
        "detail": {"S": "stored before"},
    }
    dynamodb.put_item(TableName=STATE_TABLE, Item=old)
    store.history.record(unverified("same millisecond"))
    store.history.record(unverified("later", at=NOW + 1))
    store.history.record(unverified("earlier", at=NOW - 1))
    details = [e.detail or "" for e in store.history.of_image(WEB)]
    assert details[0] == "later" and details[-1] == "earlier"
    assert sorted(details[1:3]) == ["same millisecond", "stored before"]


def test_a_key_stays_far_below_dynamodbs_sort_key_limit(dynamodb: Any, state_table: str) -> None:
    from tagpin.adapters.dynamodb.history import DynamoHistory

    history = DynamoHistory(Table(dynamodb, STATE_TABLE))
    item = history.image_record(unverified("x" * 10_000))
    assert len(item["sk"]["S"].encode()) < 100


# -- what a person sees: the console's timeline of the image, after one round ----------------------


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, dynamodb: Any, state_table: str, queues: Any) -> Iterator[World]:
    yield make_world(monkeypatch, dynamodb, queues, "token")
    wiring.reset()


def test_the_consoles_timeline_shows_each_targets_decision_of_one_round(world: World) -> None:
    """Two targets of the image roll in one round although the signature gate (warn) would refuse
    the digest: the console's image page says so for each of them, not for the last one only."""
    config = parse_config(
        f"""
clusters: {{prod: {{kubeconfig: {{file: /dev/null}}}}}}
images:
  - image: {IMAGE}
    signatures: {{mode: warn, keys: [{{pem: {json.dumps(PEM)}}}]}}
    targets:
      - {{cluster: prod, namespace: web, name: web, container: web}}
      - {{cluster: prod, namespace: web, name: api, container: web}}
"""
    )
    running = {"web": f"{IMAGE}@{D0}"}
    clusters = FakeClusters(
        prod=FakeCluster([Workload("1", dict(running), namespace="web", name=n) for n in ("web", "api")])
    )
    checker = ScriptedChecker(SignatureVerdict(False, SignatureProblem.WRONG_KEY, "signed by sha256:x"))
    applier = Applier(
        followed=lambda: config.followed,
        state=world.state,
        workloads=clusters,
        clock=FakeClock(NOW, step=1_000),  # a second a call: the round reads it once
        admission=standard(
            state=world.state, settings=lambda: config.rollout, signatures=signature_gate(checker)
        ),
    )
    results = applier.apply(change(image=IMAGE))
    assert [r.outcome for r in results] == [ApplyOutcome.PATCHED] * 2
    page = world.get("/console/image", cookie=world.sign_in(), query={"ref": IMAGE})["body"]
    details = re.findall(r'<div class="detail">([^<]*): signature: wrong-key', page)
    assert sorted(details) == ["prod/web/Deployment/api/web", "prod/web/Deployment/web/web"]
