"""The changes queue against a moto FIFO queue: message groups per image, deduplication per digest;
delayed verifications on the same queue, each a group of its own, due at ``due_at``."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError
from tagpin.adapters.sqs import SqsChangeQueue, SqsVerificationQueue, deduplication_id, group_id
from tagpin.domain.messages import Change, Trigger, Verification, VerificationKind, parse_message
from tagpin.domain.moves import Move
from tagpin.ports.queues import MAX_DELAY_S

from tests.support.constants import D1, D2, NGINX_LATEST
from tests.support.queues import ListQueue


def _receive_all(sqs, url: str) -> list[dict]:
    messages: list[dict] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            MessageSystemAttributeNames=["All"],
            VisibilityTimeout=60,
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not batch:
            return messages
        messages.extend(batch)


def test_send_sets_group_and_deduplication_ids(sqs, queues) -> None:
    change = Change(
        move=Move(image=NGINX_LATEST, digest=D1, observed_at=1234, trigger="webhook", correlation_id="c-1")
    )
    SqsChangeQueue(sqs, queues.url).send(change)
    (message,) = _receive_all(sqs, queues.url)
    attributes = message["Attributes"]
    assert attributes["MessageGroupId"] == NGINX_LATEST
    expected = hashlib.sha256(f"{NGINX_LATEST}@{D1}".encode()).hexdigest()
    assert attributes["MessageDeduplicationId"] == expected
    assert Change.model_validate_json(message["Body"]) == change


def test_the_same_change_twice_is_one_message(sqs, queues) -> None:
    queue = SqsChangeQueue(sqs, queues.url)
    queue.send(Change(move=Move(image=NGINX_LATEST, digest=D1, observed_at=1, trigger="webhook")))
    # Another observation of the same digest (poll a moment later) deduplicates too.
    queue.send(Change(move=Move(image=NGINX_LATEST, digest=D1, observed_at=2, trigger="poll")))
    messages = _receive_all(sqs, queues.url)
    assert len(messages) == 1
    assert Change.model_validate_json(messages[0]["Body"]).move.observed_at == 1


def test_a_different_digest_is_another_message_in_the_same_group(sqs, queues) -> None:
    queue = SqsChangeQueue(sqs, queues.url)
    queue.send(Change(move=Move(image=NGINX_LATEST, digest=D1, observed_at=1, trigger="poll")))
    queue.send(Change(move=Move(image=NGINX_LATEST, digest=D2, observed_at=2, trigger="poll")))
    # FIFO: within one group, the second is delivered after the first is deleted.
    first = sqs.receive_message(QueueUrl=queues.url, MaxNumberOfMessages=10, VisibilityTimeout=60)["Messages"]
    for message in first:
        sqs.delete_message(QueueUrl=queues.url, ReceiptHandle=message["ReceiptHandle"])
    rest = _receive_all(sqs, queues.url)
    digests = [Change.model_validate_json(m["Body"]).move.digest for m in [*first, *rest]]
    assert digests == [D1, D2]


def test_other_images_are_other_groups(sqs, queues) -> None:
    queue = SqsChangeQueue(sqs, queues.url)
    other = "ghcr.io/acme/api:stable"
    queue.send(Change(move=Move(image=NGINX_LATEST, digest=D1, observed_at=1, trigger="poll")))
    queue.send(Change(move=Move(image=other, digest=D1, observed_at=1, trigger="poll")))
    messages = _receive_all(sqs, queues.url)
    assert sorted(m["Attributes"]["MessageGroupId"] for m in messages) == sorted([NGINX_LATEST, other])
    assert len({m["Attributes"]["MessageDeduplicationId"] for m in messages}) == 2


def test_long_image_names_hash_the_group_id(sqs, queues) -> None:
    image = "registry.example.com/" + "/".join(["team-" + "x" * 40] * 5) + ":stable"
    assert len(image) > 128
    SqsChangeQueue(sqs, queues.url).send(
        Change(move=Move(image=image, digest=D1, observed_at=1, trigger="poll"))
    )
    (message,) = _receive_all(sqs, queues.url)
    group = message["Attributes"]["MessageGroupId"]
    assert len(group) <= 128
    assert group == hashlib.sha256(image.encode()).hexdigest()
    assert Change.model_validate_json(message["Body"]).move.image == image


@pytest.mark.parametrize(("length", "hashed"), [(127, False), (128, False), (129, True)])
def test_group_id_boundary(length: int, hashed: bool) -> None:
    image = "a" * length
    assert (group_id(image) != image) is hashed
    assert len(group_id(image)) <= 128


def test_deduplication_id_depends_on_image_and_digest() -> None:
    assert deduplication_id(NGINX_LATEST, D1) == deduplication_id(NGINX_LATEST, D1)
    assert deduplication_id(NGINX_LATEST, D1) != deduplication_id(NGINX_LATEST, D2)
    assert deduplication_id(NGINX_LATEST, D1) != deduplication_id("docker.io/library/nginx:1.27", D1)
    assert len(deduplication_id(NGINX_LATEST, D1)) == 64  # SQS allows at most 128


def test_list_queue_records_in_order() -> None:
    queue = ListQueue()
    a = Change(move=Move(image=NGINX_LATEST, digest=D1, observed_at=1, trigger="poll"))
    b = Change(move=Move(image=NGINX_LATEST, digest=D2, observed_at=2, trigger="poll"))
    queue.send(a)
    queue.send(b)
    assert queue.sent == [a, b]


# -- verifications on the same FIFO queue ----------------------------------------------------------
def _verification(**more: object) -> Verification:
    return Verification(
        kind=VerificationKind.VERIFY,
        move=Move(image=NGINX_LATEST, digest=D1, observed_at=1, trigger=Trigger.POLL),
        target_id="c/ns/Deployment/w/w",
        **more,
    )


def test_a_verification_is_due_after_its_delay_in_a_group_of_its_own(sqs, queues) -> None:
    SqsVerificationQueue(sqs, queues.url, clock=lambda: 1_000_000).send(_verification(), 30)
    SqsChangeQueue(sqs, queues.url).send(
        Change(move=Move(image=NGINX_LATEST, digest=D1, observed_at=1, trigger="poll"))
    )
    messages = _receive_all(sqs, queues.url)
    assert len(messages) == 2  # neither waits behind the other
    (message,) = [m for m in messages if m["Attributes"]["MessageGroupId"].startswith("verify-")]
    received = parse_message(message["Body"])
    assert isinstance(received, Verification)
    assert (
        received.due_at == 1_030_000
        and received.wait_ms(1_000_000) == 30_000
        and received.wait_ms(1_030_000) == 0
    )
    # the id is the hash of the body in the flat shape deployed stacks sent (pinned in test_wire)
    key = message["Attributes"]["MessageDeduplicationId"]
    assert key == hashlib.sha256(received.flat_json().encode()).hexdigest()
    assert message["Attributes"]["MessageGroupId"] == "verify-" + key


def test_the_same_verification_sent_twice_at_once_is_one_message_and_later_another(sqs, queues) -> None:
    now = [1_000_000]
    queue = SqsVerificationQueue(sqs, queues.url, clock=lambda: now[0])
    queue.send(_verification(), 10)
    queue.send(_verification(), 10)  # a duplicate send (a retried invocation): delivered once
    now[0] += 60_000
    queue.send(_verification(), 10)  # a deferred rollout retried again later: a new verification
    dues = sorted(parse_message(m["Body"]).due_at for m in _receive_all(sqs, queues.url))  # type: ignore[union-attr]
    assert dues == [1_010_000, 1_070_000]


def test_a_delay_is_bounded_by_the_longest_wait(sqs, queues) -> None:
    SqsVerificationQueue(sqs, queues.url, clock=lambda: 0).send(_verification(), 10_000)
    (message,) = _receive_all(sqs, queues.url)
    assert parse_message(message["Body"]).due_at == MAX_DELAY_S * 1000  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (
            Change(move=Move(image=NGINX_LATEST, digest=D1, observed_at=1, trigger="poll")).model_dump_json(),
            Change,
        ),
        # a change sent before verifications shared the queue: no marker, told apart by its shape
        (
            '{"image": "'
            + NGINX_LATEST
            + '", "digest": "'
            + D1
            + '", "observed_at": 1, "trigger": "webhook"}',
            Change,
        ),
        (_verification().model_dump_json(exclude_none=True), Verification),
    ],
)
def test_a_message_is_a_change_or_a_verification(body: str, kind: type) -> None:
    assert type(parse_message(body)) is kind


@pytest.mark.parametrize(
    "body", ["not json", "{}", '{"kind": "verify"}', '{"kind": "explode", "image": "a/b:c", "digest": "x"}']
)
def test_anything_else_is_refused(body: str) -> None:
    with pytest.raises(ValidationError):
        parse_message(body)
