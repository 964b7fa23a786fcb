"""The delivery log's contract (``tagpin.ports.webhooks.DeliveryLog``), over the DynamoDB adapter
(moto) and the in-memory fake alike: a claim is taken when the key is unclaimed, expired, or held
by the same queued message (SQS handing that message over again); a claim of another message, or
one without a message (a check that was not queued; a claim written before the message id was
kept), is held until it expires or is released."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tagpin.adapters.dynamodb.deliveries import DeliveryStore
from tagpin.ports.webhooks import DeliveryLog

from tests.support.deliveries import MemoryDeliveryLog

KEYS = ("k1", "k2")
MESSAGES = (None, "m-1", "m-2")

claims = st.tuples(st.just("claim"), st.sampled_from(KEYS), st.sampled_from(MESSAGES), st.integers(0, 3))
releases = st.tuples(st.just("release"), st.sampled_from(KEYS), st.none(), st.integers(0, 3))
operations = st.lists(st.one_of(claims, releases), max_size=12)
TTL = 5


def expected(ops: list[tuple[str, str, str | None, int]]) -> list[bool | None]:
    """The contract, written out: each claim's answer (None for a release)."""
    held: dict[str, tuple[int, str | None]] = {}
    now, answers = 100, []
    answer: bool | None
    for op, k, message, step in ops:
        now += step
        if op == "release":
            held[k], answer = (now - 1, held.get(k, (0, None))[1]), None
        else:
            expires, by = held.get(k, (0, None))
            answer = expires < now or (message is not None and by == message)
            if answer:
                held[k] = (now + TTL, message)
        answers.append(answer)
    return answers


def run(log: DeliveryLog, ops: list[tuple[str, str, str | None, int]], prefix: str) -> list[bool | None]:
    now, answers = 100, []
    answer: bool | None
    for op, k, message, step in ops:
        now += step
        if op == "release":
            log.release_delivery(prefix + k, now)
            answer = None
        else:
            answer = log.claim_delivery(prefix + k, now, now + TTL, message)
        answers.append(answer)
    return answers


@pytest.fixture(params=["dynamodb", "memory"])
def log(request: pytest.FixtureRequest) -> DeliveryLog:
    if request.param == "memory":
        return MemoryDeliveryLog()
    dynamodb, table = request.getfixturevalue("dynamodb"), request.getfixturevalue("state_table")
    return DeliveryStore(dynamodb, table)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_claims_follow_the_contract(log: DeliveryLog, ops: list[tuple[str, str, str | None, int]]) -> None:
    assert run(log, ops, f"{uuid.uuid4()}/") == expected(ops)  # a fresh key space per example


def test_a_message_received_again_takes_its_own_claim_and_no_other(log: DeliveryLog) -> None:
    assert log.claim_delivery("k", 100, 200, "m-1")
    assert log.claim_delivery("k", 101, 201, "m-1")  # SQS handed m-1 over again: checked again
    assert not log.claim_delivery("k", 102, 202, "m-2")  # another message of that delivery: a duplicate
    assert not log.claim_delivery("k", 103, 203)  # a check that was not queued: a duplicate


def test_a_claim_without_a_message_is_held_against_every_message(log: DeliveryLog) -> None:
    assert log.claim_delivery("k", 100, 200)
    assert not log.claim_delivery("k", 101, 201, "m-1")
    assert log.claim_delivery("k", 201, 300, "m-1")  # once expired, claimed again


def test_a_claim_written_before_message_ids_were_kept_is_still_held(dynamodb: Any, state_table: str) -> None:
    """A deploy must not turn the claims already written (their exact item: no ``message_id``) into
    free ones: a message claiming such a delivery is a duplicate until the claim expires."""
    old = {
        "pk": {"S": "DELIVERY#k"},
        "sk": {"S": "STATE"},
        "expires_at": {"N": "200"},
        "claimed_at": {"N": "100"},
    }
    dynamodb.put_item(TableName=state_table, Item=old)
    log = DeliveryStore(dynamodb, state_table)
    assert not log.claim_delivery("k", 150, 250, "m-1")
    assert log.claim_delivery("k", 201, 301, "m-1")
    (item,) = [i for i in dynamodb.scan(TableName=state_table)["Items"] if i["pk"]["S"] == "DELIVERY#k"]
    assert item["message_id"] == {"S": "m-1"} and item["expires_at"] == {"N": "301"}
