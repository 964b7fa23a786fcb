"""Typed values between modules: a ``Digest`` is validated where it enters (a message off the queue,
a reference parsed, a move built) and is the text it is everywhere else; a ``Move`` carries one."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from tagpin.domain.messages import (
    Change,
    TargetChange,
    Trigger,
    Verification,
    VerificationKind,
    parse_message,
)
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest, ImageRef, InvalidReference, is_digest

from tests.support.constants import D1, WEB

SHA512 = "sha512:" + "a" * 128


@pytest.mark.parametrize("text", [D1, SHA512, "sha256:" + "0123456789abcdef" * 4])
def test_a_digest_is_the_text_it_was_given(text: str) -> None:
    digest = Digest(text)
    assert digest == text and str(digest) == text and hash(digest) == hash(text)
    assert isinstance(digest, str) and json.dumps({"d": digest}) == json.dumps({"d": text})
    assert (digest.algorithm, digest.hex) == tuple(text.split(":"))
    assert Digest(digest) is digest


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "digest must look like"),
        ("sha256:" + "1" * 63, "sha256 digest must be exactly 64 lowercase hex characters"),
        ("sha256:" + "A" * 64, "sha256 digest must be exactly 64 lowercase hex characters"),
        ("latest", "digest must look like"),
        (256, "digest must be a string"),
    ],
)
def test_anything_else_is_refused_with_why(text: object, problem: str) -> None:
    with pytest.raises(InvalidReference, match=problem):
        Digest(text)


@given(st.text(max_size=80))
def test_digest_agrees_with_is_digest(text: str) -> None:
    if is_digest(text):
        assert Digest(text) == text
    else:
        with pytest.raises(InvalidReference):
            Digest(text)


def test_messages_carry_digests_and_name_a_bad_one() -> None:
    move = Move(image=WEB, digest=D1, observed_at=1, trigger=Trigger.POLL)
    change = parse_message(Change(move=move).model_dump_json())
    assert isinstance(change.move.digest, Digest) and change.move.digest == D1
    assert json.loads(change.model_dump_json())["move"]["digest"] == D1  # written as the text it is
    with pytest.raises(ValidationError, match="digest"):
        Change.model_validate({"move": {**move.model_dump(), "digest": "sha256:nothex"}})
    work = TargetChange(
        target_id="a/b/Deployment/c/d", cluster="a", namespace="b", kind="Deployment", name="c",
        container="d", move=move,
    )  # fmt: skip
    assert isinstance(work.move.digest, Digest) and work.model_dump()["move"]["digest"] == D1
    assert isinstance(ImageRef.parse(f"{WEB}@{D1}").digest, Digest)


def test_a_move_validates_its_digest() -> None:
    change = Change(
        move=Move(image=WEB, digest=D1, observed_at=7, trigger=Trigger.WEBHOOK, changed_at=5, tag=None)
    )
    move = change.move
    assert (move.image, move.digest, move.observed_at, move.changed_at, move.trigger) == (
        WEB, D1, 7, 5, Trigger.WEBHOOK,
    )  # fmt: skip
    assert move.source == WEB
    assert isinstance(Move(image=WEB, digest=D1, observed_at=1, trigger=Trigger.POLL).digest, Digest)
    with pytest.raises(ValidationError, match="digest"):
        Move(image=WEB, digest="sha256:short", observed_at=1, trigger=Trigger.POLL)


def test_the_verifications_and_changes_a_move_sends_carry_every_field_of_it() -> None:
    """The verifications and changes a move sends (a retry, a wave advanced, an approved wave)
    carry it whole, so none forgets its trigger, correlation id, changed_at or version."""
    move = Move(
        image=WEB, digest=D1, observed_at=5, trigger=Trigger.WEBHOOK, changed_at=4, correlation_id="c-1",
        tag="1.4.2",
    )  # fmt: skip
    verification = Verification(
        kind=VerificationKind.VERIFY, move=move, target_id="dev/demo/Deployment/web/app", applied_at=9
    )
    back = parse_message(verification.model_dump_json(exclude_none=True))
    assert isinstance(back, Verification) and back.move == move
    assert (back.target_id, back.applied_at, back.attempt) == ("dev/demo/Deployment/web/app", 9, 0)
    change = Change(move=move.by(Trigger.PROMOTE), round="wave-1")
    assert change.move == move.model_copy(update={"trigger": Trigger.PROMOTE}) and change.round == "wave-1"
    assert move.trigger is Trigger.WEBHOOK  # by() is a new move; the move is a value
    # a verification sent before verifications carried their trigger: the verifier's
    old = Verification.model_validate({"kind": "advance", "image": WEB, "digest": D1, "observed_at": 5})
    assert old.move.trigger is Trigger.VERIFY
