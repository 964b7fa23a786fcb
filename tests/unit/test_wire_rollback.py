"""Rolling a stack back across the new message shape: what this version sends on the changes queue
is read by the version before it (its models, kept verbatim in tests/support/deployed), so the
messages in flight when a stack is rolled back are worked, not sent to the dead-letter queue.

Each message is sent through the real queue adapter and its body read with the deployed models;
the ids the older stack gives it when it sends it on (a redrive, the next wave, the verification
looked at again) are those this version gave it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from pydantic import ValidationError
from tagpin.adapters.sqs import SqsChangeQueue, SqsVerificationQueue, deduplication_id, group_id
from tagpin.domain.messages import Change, Trigger, Verification, VerificationKind, parse_message
from tagpin.domain.moves import Move

from tests.support.constants import D1, WEB, WEB_TARGET
from tests.support.deployed import messages_59b1dd6 as deployed
from tests.support.queues import RecordingSqs

SENT_AT = 1_763_702_500_000
COMMIT = "a" * 40
MOVE = Move(
    image=WEB,
    digest=D1,
    observed_at=1_763_702_400_000,
    trigger=Trigger.WEBHOOK,
    changed_at=1_763_702_399_000,
    correlation_id="VxYz1gHhIAMEabc=",
)
CHANNEL = Move(
    image="127.0.0.1:5000/demo/web@stable",
    digest=D1,
    observed_at=7,
    trigger=Trigger.POLL,
    changed_at=6,
    tag="1.4.2",
)

CHANGES = [
    pytest.param(Change(move=MOVE), id="webhook"),
    pytest.param(Change(move=MOVE.by(Trigger.RECONCILE), reconcile_run="run-7"), id="reconcile-healing"),
    pytest.param(Change(move=MOVE.by(Trigger.PROMOTE), round="wave-1"), id="next-wave"),
    pytest.param(Change(move=Move(image=WEB, digest=D1, observed_at=1, trigger=Trigger.POLL)), id="bare"),
    pytest.param(Change(move=CHANNEL), id="channel"),
]

VERIFICATIONS = [
    pytest.param(
        Verification(kind=VerificationKind.VERIFY, move=MOVE, target_id=WEB_TARGET, applied_at=1, attempt=2),
        id="verify",
    ),
    pytest.param(
        Verification(
            kind=VerificationKind.VERIFY,
            move=MOVE,
            target_id=WEB_TARGET,
            applied_at=1,
            paused_at=5,
            paused_since=3,
            commit=COMMIT,
        ),
        id="paused-write-back",
    ),
    pytest.param(Verification(kind=VerificationKind.ADVANCE, move=MOVE.by(Trigger.VERIFY)), id="advance"),
    pytest.param(Verification(kind=VerificationKind.RETRY, move=CHANNEL.by(Trigger.PROMOTE)), id="retry"),
    pytest.param(Verification(kind=VerificationKind.EXPIRE, move=MOVE, attempt=1), id="expire"),
]


def _flat(move: Move) -> dict[str, Any]:
    """The move's fields as the deployed models name them."""
    return move.model_dump(mode="json")


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_this_version_sends_is_read_by_the_version_before(change: Change) -> None:
    client = RecordingSqs()
    SqsChangeQueue(client, "url").send(change)
    (sent,) = client.sent
    old = deployed.parse_message(sent["MessageBody"])
    assert isinstance(old, deployed.Change)
    fields = old.model_dump(mode="json")
    assert {k: fields[k] for k in _flat(change.move)} == _flat(change.move)
    assert (old.reconcile_run, old.round) == (change.reconcile_run, change.round)
    # The older stack sends it on (a redrive, the same move seen again) with the same ids.
    assert group_id(old.image) == sent["MessageGroupId"]
    assert (
        deduplication_id(old.image, old.digest, old.reconcile_run, old.round, old.changed_at)
        == sent["MessageDeduplicationId"]
    )
    # and what it sends, this version reads back as the same change
    assert parse_message(old.model_dump_json()) == change


@pytest.mark.parametrize("verification", VERIFICATIONS)
def test_a_verification_this_version_sends_is_read_by_the_version_before(verification: Verification) -> None:
    client = RecordingSqs()
    SqsVerificationQueue(client, "url", clock=lambda: SENT_AT).send(verification, 30)
    (sent,) = client.sent
    old = deployed.parse_message(sent["MessageBody"])
    assert isinstance(old, deployed.Verification)
    move = verification.move
    assert (old.kind, old.image, old.digest, old.observed_at, old.trigger, old.correlation_id) == (
        verification.kind,
        move.image,
        move.digest,
        move.observed_at,
        move.trigger,
        move.correlation_id,
    )
    kept = ("target_id", "applied_at", "paused_at", "paused_since", "attempt", "commit")
    assert old.model_dump(include=set(kept)) == verification.model_dump(include=set(kept))
    assert old.due_at == SENT_AT + 30_000
    # The deployed verification queue's deduplication id was the hash of this body: the same.
    assert (
        hashlib.sha256(old.model_dump_json(exclude_none=True).encode()).hexdigest()
        == (sent["MessageDeduplicationId"])
    )


def test_the_move_alone_would_go_to_the_dead_letter_queue_of_the_version_before() -> None:
    """Why both shapes are written: the move alone, as the version before this one was written,
    is refused by the deployed models (naming the flat fields they miss)."""
    body = json.loads(Change(move=MOVE).model_dump_json())
    alone = json.dumps({k: v for k, v in body.items() if k not in _flat(MOVE)})
    assert "move" in json.loads(alone)
    with pytest.raises(ValidationError, match="image"):
        deployed.parse_message(alone)
    assert parse_message(alone) == Change(move=MOVE)  # this version reads either
