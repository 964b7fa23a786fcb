"""The Move on the wire: changes, target changes and verifications carry one ``move``, and what
deployed stacks wrote before (flat fields: in flight on the queue, in its dead letters, keyed in
the idempotency records) stays readable, with the same deduplication and group ids.

The old bodies below are literals as deployed stacks sent them; the ids beside them were computed
by that code (at 59b1dd6), not by the code under test."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError
from tagpin.adapters.sqs import SqsChangeQueue, SqsVerificationQueue
from tagpin.domain.messages import (
    Change,
    OnceKey,
    TargetChange,
    Trigger,
    Verification,
    VerificationKind,
    parse_message,
)
from tagpin.domain.moves import Move
from tagpin.ports.queues import DeadLetter
from tagpin.usecases.deadletters import summary

from tests.support.constants import D1, WEB, WEB_TARGET
from tests.support.queues import RecordingSqs

MOVE_KEYS = {"image", "digest", "observed_at", "trigger", "changed_at", "correlation_id", "tag"}

# (body as deployed stacks sent it, its MessageGroupId, its MessageDeduplicationId)
OLD_CHANGES = [
    pytest.param(
        '{"image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '","observed_at":1763702400000,'
        '"trigger":"webhook","correlation_id":"VxYz1gHhIAMEabc=","reconcile_run":null,'
        '"changed_at":1763702399000,"round":null,"tag":null}',
        WEB,
        "e4af00da0f530144d626ccafa2f7a565baa18d9d71ee4c4705c06eb021643d2a",
        id="webhook",
    ),
    pytest.param(
        '{"image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '","observed_at":1763702400000,'
        '"trigger":"reconcile","correlation_id":"run-7","reconcile_run":"run-7",'
        '"changed_at":1763702399000,"round":null,"tag":null}',
        WEB,
        "e176d6d90fcac71f74400a86f644c6fc8638f24ff814a326dc376b6ea97af95b",
        id="reconcile-healing",
    ),
    pytest.param(
        '{"image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '","observed_at":1763702400000,'
        '"trigger":"promote","correlation_id":"VxYz1gHhIAMEabc=","reconcile_run":null,'
        '"changed_at":1763702399000,"round":"wave-1","tag":null}',
        WEB,
        "f30546f0a52fe1a58600569ed1c808bd0086622a34336ca4bb8f17a8f8ad690f",
        id="next-wave",
    ),
    pytest.param(  # sent before changes carried changed_at (and shaped like events/consumer-sqs.json)
        '{"image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '","observed_at":1763702400000,'
        '"trigger":"webhook","correlation_id":"VxYz1gHhIAMEabc="}',
        WEB,
        "fbb19e46da615efcc20314100ae3e3a79995d7fb377c36eec32b841cf4663ef3",
        id="before-changed-at",
    ),
    pytest.param(
        '{"image":"127.0.0.1:5000/demo/web@stable","digest":"' + D1 + '","observed_at":1763702400000,'
        '"trigger":"poll","correlation_id":"poll-1","reconcile_run":null,"changed_at":1763702399000,'
        '"round":null,"tag":"1.4.2"}',
        "127.0.0.1:5000/demo/web@stable",
        "3dcf8043ebcdb6e987c78ef3e40bc6cb5180b138dd598cb9d252448e42ff1f76",
        id="channel",
    ),
]

# (body as deployed stacks sent it, the MessageDeduplicationId they gave it when sending it again
# at SENT_AT with a 30 s delay; its MessageGroupId is "verify-" + that id)
SENT_AT = 1_763_702_500_000
OLD_VERIFICATIONS = [
    pytest.param(
        '{"kind":"verify","image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '",'
        '"observed_at":1763702400000,"target_id":"dev/demo/Deployment/web/app","applied_at":1763702401000,'
        '"attempt":2,"trigger":"webhook","correlation_id":"VxYz1gHhIAMEabc=","due_at":1763702431000}',
        "dde881da3944a32734f86479a6717cb1eeaf00610849e38a919aaf5019a850cc",
        id="verify",
    ),
    # Sent before verifications carried their trigger: read as the verifier's (the move names one),
    # so sent again it has the id deployed stacks gave it with ``"trigger":"verify"`` (the one it
    # had without is 2d5ae42e...; a verification's id changes with each sending anyway: due_at).
    pytest.param(
        '{"kind":"advance","image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '",'
        '"observed_at":1763702400000,"attempt":0,"due_at":1763702431000}',
        "d18dc280b12e1553f89e63c6a04bd4bb3915228dec4b2efb1f3f3ab67653fe7b",
        id="advance-without-trigger",
    ),
]


def _flat(body: str) -> dict[str, Any]:
    return {k: v for k, v in json.loads(body).items() if v is not None}


def _move_and_rest(message: Change | Verification) -> dict[str, Any]:
    """The message's fields and its move's side by side, ``None`` left out: the flat shape."""
    fields = {**message.model_dump(mode="json", exclude={"move"}), **message.move.model_dump(mode="json")}
    return {k: v for k, v in fields.items() if v is not None}


@pytest.mark.parametrize(("body", "group", "deduplication"), OLD_CHANGES)
def test_a_change_in_flight_from_a_deployed_stack_is_read_and_keeps_its_queue_ids(
    body: str, group: str, deduplication: str
) -> None:
    change = parse_message(body)
    assert isinstance(change, Change)
    assert _move_and_rest(change) == _flat(body)  # every field, none lost or invented
    assert change.move.image == json.loads(body)["image"] and change.move.digest == D1
    # sent again (a redrive, or the same move noticed again): the ids deployed stacks used
    client = RecordingSqs()
    SqsChangeQueue(client, "url").send(change)
    (sent,) = client.sent
    assert (sent["MessageGroupId"], sent["MessageDeduplicationId"]) == (group, deduplication)
    # written in both shapes (the move whole, and flat beside it for the version before: see
    # test_wire_rollback.py); read back the same
    written = json.loads(sent["MessageBody"])
    assert set(written) == {"move", "reconcile_run", "round", *MOVE_KEYS}
    assert set(written["move"]) == MOVE_KEYS
    assert {k: written[k] for k in MOVE_KEYS} == written["move"]
    assert parse_message(sent["MessageBody"]) == change


@pytest.mark.parametrize(("body", "deduplication"), OLD_VERIFICATIONS)
def test_a_verification_from_a_deployed_stack_is_read_and_keeps_its_queue_ids(
    body: str, deduplication: str
) -> None:
    verification = parse_message(body)
    assert isinstance(verification, Verification)
    expected = _flat(body)
    expected.setdefault("trigger", "verify")
    assert _move_and_rest(verification) == expected
    client = RecordingSqs()
    SqsVerificationQueue(client, "url", clock=lambda: SENT_AT).send(verification, 30)
    (sent,) = client.sent
    assert sent["MessageDeduplicationId"] == deduplication
    assert sent["MessageGroupId"] == "verify-" + deduplication
    written = json.loads(sent["MessageBody"])
    assert {k: v for k, v in written.items() if k in MOVE_KEYS} == written["move"]
    again = parse_message(sent["MessageBody"])
    assert again == verification.model_copy(update={"due_at": SENT_AT + 30_000})


def test_a_verification_of_a_channels_move_carries_its_version_and_changed_at() -> None:
    """Built from the move, a verification no longer drops what the flat one had no field for."""
    move = Move(
        image="127.0.0.1:5000/demo/web@stable",
        digest=D1,
        observed_at=5,
        trigger=Trigger.POLL,
        changed_at=4,
        correlation_id="c-1",
        tag="1.4.2",
    )
    verification = Verification(kind=VerificationKind.VERIFY, move=move, target_id=WEB_TARGET)
    read = parse_message(verification.model_dump_json(exclude_none=True))
    assert isinstance(read, Verification) and read.move == move
    assert read.move.source == "127.0.0.1:5000/demo/web:1.4.2"


def test_a_target_change_in_the_old_shape_is_read_with_the_same_key() -> None:
    body = (
        '{"target_id":"dev/demo/Deployment/web/app","cluster":"dev","namespace":"demo","kind":"Deployment",'
        '"name":"web","container":"app","image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '",'
        '"observed_at":1763702400000,"trigger":"webhook","correlation_id":"VxYz1gHhIAMEabc=",'
        '"reconcile_run":null,"changed_at":1763702399000,"tag":null}'
    )
    change = TargetChange.model_validate_json(body)
    assert change.key == OnceKey(WEB_TARGET, D1, 1763702399000, None)
    assert change.move == Move(
        image=WEB,
        digest=D1,
        observed_at=1763702400000,
        trigger=Trigger.WEBHOOK,
        changed_at=1763702399000,
        correlation_id="VxYz1gHhIAMEabc=",
    )
    assert TargetChange.model_validate_json(change.model_dump_json()) == change


def test_the_new_shape_is_read_as_written() -> None:
    body = (
        '{"move":{"image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '","observed_at":7,'
        '"trigger":"poll","changed_at":6},"reconcile_run":"run-1"}'
    )
    change = parse_message(body)
    assert isinstance(change, Change) and change.reconcile_run == "run-1"
    assert change.move == Move(image=WEB, digest=D1, observed_at=7, trigger=Trigger.POLL, changed_at=6)
    assert parse_message(change.model_dump_json()) == change
    verification = parse_message(
        '{"kind":"retry","move":{"image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '",'
        '"observed_at":7,"trigger":"promote"},"due_at":9}'
    )
    assert isinstance(verification, Verification)
    assert (verification.kind, verification.move.trigger, verification.due_at) == (
        VerificationKind.RETRY,
        Trigger.PROMOTE,
        9,
    )


WEB_JSON = '"image":"127.0.0.1:5000/demo/web:stable"'


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("{" + WEB_JSON + ',"digest":"sha256:nothex","observed_at":1,"trigger":"poll"}', "move.digest"),
        ('{"digest":"' + D1 + '","observed_at":1,"trigger":"poll"}', "move.image"),
        (
            '{"move":{' + WEB_JSON + ',"digest":"' + D1 + '","observed_at":-1,"trigger":"poll"}}',
            "move.observed_at",
        ),
        ('{"kind":"verify","move":{' + WEB_JSON + ',"digest":"' + D1 + '","observed_at":1}}', "move.trigger"),
    ],
)
def test_a_bad_move_in_either_shape_is_refused_naming_the_field(body: str, field: str) -> None:
    with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
        parse_message(body)


@pytest.mark.parametrize(
    ("body", "kind", "trigger"),
    [
        (OLD_CHANGES[0].values[0], "change", "webhook"),
        (OLD_VERIFICATIONS[0].values[0], "verify", "webhook"),
        (OLD_VERIFICATIONS[1].values[0], "advance", "verify"),
    ],
)
def test_a_dead_letter_in_the_old_shape_is_listed(body: str, kind: str, trigger: str) -> None:
    letter = summary(DeadLetter(message_id="m-1", body=body, group=WEB, receipt="r-1"))
    assert (letter.kind, letter.image, letter.digest, letter.trigger) == (kind, WEB, D1, trigger)
