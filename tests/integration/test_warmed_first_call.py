"""A warmed container's first invocation costs what a warm one does (issue 26: the first push after a
start): ``tagpin.warming`` builds at a container's start what that first invocation would, so the
first invocation imports nothing of the library, pydantic, aiohttp, kubernetes, boto3 or YAML,
builds no pydantic validator (a model, a TypeAdapter, the Kubernetes client's ``validate_call``), sets
up no AWS operation in botocore (its events' handlers looked up at an operation's first call),
resolves no endpoint and no shape of botocore's model (``tagpin.aws_warming`` rehearses each
operation at the start, sending nothing, its parameters and its answer filled)
and starts no thread of its own (the registry client's event loop, which its first request started
with its session and connection: warming asks each followed registry once; the workers of the pools
that overlap its round trips, which its first overlapped calls started: warming starts them), and
opens no TCP connection the next call of its kind does not (the registry's, kept open from warming).

Not a hand-kept list: each function's container is started in a process of its own
(tests/support/firstcall.py), warmed, and given the event of a real push on the local stack (the
webhook a registry's notification and then the check it queued, the poller its schedule, the
consumer the change the webhook's check queued); whatever that first invocation imports or builds
is named. A handler that starts importing something new at its first call fails here until warming
builds it too. Without warming (the control) the same first invocation imports the use cases and the
clients and sets up the AWS operation it calls, so the check can fail."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from tagpin_local.lambda_events import http_api_event, scheduled_event, sqs_event
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

from tests.support.firstcall import Call, invoke_started_container
from tests.support.stack import empty

pytestmark = pytest.mark.integration
REPOSITORY, TAG = "demo/web", "stable"  # followed by the stack's own configuration


def notification(stack: LocalStack) -> dict[str, Any]:
    """A new image pushed under the followed tag, and the registry's notification of it."""
    assert stack.registry is not None
    digest = push_image(stack.registry.url, REPOSITORY, TAG)
    target = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "repository": REPOSITORY,
        "tag": TAG,
        "digest": digest,
    }
    envelope = {
        "events": [
            {
                "id": digest,
                "action": "push",
                "timestamp": "2026-01-01T00:00:00Z",
                "target": target,
                "request": {"host": stack.registry.host},
            }
        ]
    }
    return http_api_event(
        "POST",
        "/webhooks/distribution",
        "",
        {
            "authorization": f"Bearer {stack.webhook_token}",
            "content-type": "application/vnd.docker.distribution.events.v1+json",
        },
        json.dumps(envelope).encode(),
        "127.0.0.1",
        "POST /webhooks/{source}",
    )


def queued_changes(stack: LocalStack) -> list[dict[str, Any]]:
    """The changes on the queue, one SQS event each, in order, taken off it (one receive: a FIFO
    group's next message is held back while one is in flight)."""
    sqs = stack.client("sqs")
    messages = sqs.receive_message(
        QueueUrl=stack.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0, MessageAttributeNames=["All"]
    ).get("Messages", [])
    if messages:
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        sqs.delete_message_batch(QueueUrl=stack.queue_url, Entries=entries)
    return [sqs_event([m], stack.queue_arn) for m in messages]


def unwarmed(calls: list[Call], kinds: int = 1) -> str:
    """What each call imported of the watched packages, the pydantic validators it built, the AWS
    operations botocore set up at their first call, the endpoints and the shapes of botocore's model
    it resolved (an answer's or a parameter's, parsed or serialized the first time), the regular
    expressions it compiled (the Kubernetes client's, at a first change's read and patch), the threads it
    started (the registry client's event loop: its first request; the workers of the pools that
    overlap its round trips, ``tagpin.usecases.overlap``: its first overlapped calls), and the TCP
    connections it opened beyond what the next call of its kind opened (``kinds``: the calls
    alternate between that many kinds of event; a registry's connection, which warming keeps open)."""

    def opened(n: int) -> list[str]:
        later = calls[n + kinds].connections if n + kinds < len(calls) else calls[n].connections
        return sorted((Counter(calls[n].connections) - Counter(later)).elements())

    return "; ".join(
        f"call {n}: imported {c.watched}, built {c.built}, set up the AWS operations {c.aws_set_up},"
        f" resolved {c.endpoints_resolved} endpoints and {c.shapes_resolved} shapes of botocore's model,"
        f" compiled the regular expressions {c.regexes_compiled},"
        f" started the threads {c.threads_started} and"
        f" opened the connections {opened(n)} more than the next call of its kind"
        for n, c in enumerate(calls)
        if c.watched
        or c.built
        or c.aws_set_up
        or c.endpoints_resolved
        or c.shapes_resolved
        or c.regexes_compiled
        or c.threads_started
        or opened(n)
    )


def queued_notification(stack: LocalStack) -> dict[str, Any]:
    """The oldest notification the webhook's HTTP path queued, taken off the notifications queue as
    its event source hands it over (one SQS event)."""
    sqs = stack.client("sqs")
    messages = sqs.receive_message(
        QueueUrl=stack.notifications_url, MaxNumberOfMessages=1, WaitTimeSeconds=1
    ).get("Messages", [])
    assert len(messages) == 1, "the webhook's HTTP call queued nothing"
    sqs.delete_message(QueueUrl=stack.notifications_url, ReceiptHandle=messages[0]["ReceiptHandle"])
    return sqs_event(messages, stack.notifications_arn)


@pytest.fixture(scope="module")
def webhook_run(stack: LocalStack) -> tuple[list[Call], list[dict[str, Any]]]:
    """The webhook's container: the first push after its start (its HTTP path queues it) and the
    check of what it queued (its SQS path), then a second push and its check; and the two changes
    the checks queued (for the consumer). Each check follows its push: a check re-resolves the tag,
    so one made after both pushes would find the second digest twice. The stack's own loop of the
    notifications queue is held off meanwhile (its one receive at a time), so this container checks
    them."""
    with stack.paused("notifications"):
        empty(stack, stack.queue_url)  # nothing but what these pushes queue (another test's poll did)
        empty(stack, stack.notifications_url)
        calls = invoke_started_container(
            "webhook", [lambda: notification(stack), lambda: queued_notification(stack)] * 2
        )
    return calls, queued_changes(stack)


@pytest.fixture(scope="module")
def webhook_calls(webhook_run: tuple[list[Call], list[dict[str, Any]]]) -> list[Call]:
    return webhook_run[0]


def test_the_webhooks_first_call_imports_nothing_warming_did_not(webhook_calls: list[Call]) -> None:
    received, checked = webhook_calls[0::2], webhook_calls[1::2]
    assert all(c.answer["statusCode"] == 202 for c in received), received
    assert all(json.loads(c.answer["body"])["queued"] == 1 for c in received), received
    assert all(c.answer == {"batchItemFailures": []} for c in checked), checked
    assert not unwarmed(webhook_calls, kinds=2), (
        f"the warmed webhook's invocations did what warming did not: {unwarmed(webhook_calls, kinds=2)}"
    )


def test_the_consumers_first_call_imports_nothing_warming_did_not(
    webhook_run: tuple[list[Call], list[dict[str, Any]]],
) -> None:
    changes = webhook_run[1]  # what the webhook's two calls queued
    assert len(changes) == 2, changes
    calls = invoke_started_container("consumer", [lambda change=change: change for change in changes])
    assert all(c.answer == {"batchItemFailures": []} for c in calls), calls
    assert not unwarmed(calls), (
        f"the warmed consumer's invocations did what warming did not: {unwarmed(calls)}"
    )


def test_the_pollers_first_call_imports_nothing_warming_did_not(stack: LocalStack) -> None:
    assert stack.registry is not None

    def pushed() -> dict[str, Any]:
        assert stack.registry is not None
        push_image(stack.registry.url, REPOSITORY, TAG)
        return scheduled_event()

    # The stack's first poll ever reads every shard of the settled digests (64 Queries; none is
    # settled yet) and, in a fresh stack, the tag's first sight: once per deployment, not once per
    # container. One poll by the stack's own container first, so the measured container's two
    # calls are of one kind (CI run W ran this test first in its stack: 564 shapes on call 0).
    push_image(stack.registry.url, REPOSITORY, TAG)
    stack.functions["poller"].invoke(scheduled_event())
    calls = invoke_started_container("poller", [pushed] * 2)
    assert not unwarmed(calls), f"the warmed poller's invocations did what warming did not: {unwarmed(calls)}"


def test_the_check_sees_what_a_cold_containers_first_call_imports(stack: LocalStack) -> None:
    """The control: left cold, the webhook's first invocation imports the use cases and the clients,
    sets up the AWS operation it calls and resolves its endpoint, and this probe names them (the
    checks above can fail). The stack's own loop checks what it queued."""
    first = invoke_started_container("webhook", [lambda: notification(stack)], warm=False)[0]
    assert first.answer["statusCode"] == 202, first
    assert {"tagpin.usecases.webhook", "tagpin.domain.config"} <= set(first.watched), first
    assert "sqs.SendMessage" in first.aws_set_up, first
    assert first.endpoints_resolved >= 1, first
