"""Helpers over the local stack (``tagpin_local.stack.LocalStack``) for the integration and e2e tests."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator

import httpx
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.ports.state import State, TargetStatus
from tagpin_local.kube.manifests import deployment
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.constants import STATE_TABLE
from tests.support.waiting import wait_for


@contextlib.contextmanager
def webhook_stack(*, notifications: bool) -> Iterator[LocalStack]:
    """The webhook's tests' stack: the registry (its own notifications to the webhook on or off: off,
    the tests post them), the notifications queue's loops on, no poller; the deployment ``web``
    (container ``web``, namespace ``default``) running ``demo/web:stable``, which the stack follows."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=notifications, poll_interval=None)) as st:
        assert st.registry is not None
        st.kube.create(deployment("web", "default", f"{st.registry.host}/demo/web:stable", container="web"))
        yield st


def notify_body(st: LocalStack, digest: str, delivery: str) -> bytes:
    """A distribution notification of demo/web:stable at ``digest`` (event id ``delivery``), as the
    stack's registry posts it."""
    assert st.registry is not None
    event = {
        "id": delivery,
        "timestamp": "2026-01-01T00:00:00Z",
        "action": "push",
        "target": {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest,
            "repository": "demo/web",
            "tag": "stable",
        },
        "request": {"host": st.registry.host, "method": "PUT"},
    }
    return json.dumps({"events": [event]}).encode()


def notify(
    st: LocalStack, digest: str, delivery: str, *, body: bytes | None = None, token: str | None = None
) -> httpx.Response:
    """``body`` (by default ``notify_body``'s) posted to the stack's webhook as the registry posts it,
    with ``token`` (by default the stack's own)."""
    return httpx.post(
        st.webhook_url + "/distribution",
        content=body if body is not None else notify_body(st, digest, delivery),
        headers={
            "authorization": f"Bearer {st.webhook_token if token is None else token}",
            "content-type": "application/vnd.docker.distribution.events.v1+json",
        },
        timeout=30,
    )


def drain(st: LocalStack) -> None:
    """Run the consumer until the changes queue is empty."""
    while st.consume_once(wait_s=0):
        pass


def state_of(st: LocalStack) -> State:
    """The stack's state table, through the production repositories."""
    return dynamodb_state(st.client("dynamodb"), STATE_TABLE)


def empty(st: LocalStack, queue_url: str) -> None:
    """Delete every message visible on a queue (SQS allows a PurgeQueue only once a minute)."""
    sqs = st.client("sqs")
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )


def own_queues(st: LocalStack) -> tuple[str, str]:
    """A changes queue and its dead-letter queue for one test alone, as the stack's are made. The
    stack's own queue is shared by the tests of a module: a verification one test scheduled comes
    due during a later one. A test that counts or reads what is on a queue gives the CLI these
    instead (its endpoints file), and reads only them."""
    sqs = st.client("sqs")
    name = f"t{uuid.uuid4().hex[:16]}"
    # as the stack's (and the template's): the dead-letter queue deduplicates by content
    dlq = sqs.create_queue(
        QueueName=f"{name}-dlq.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(
        QueueName=f"{name}.fifo",
        Attributes={
            "FifoQueue": "true",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}),
        },
    )["QueueUrl"]
    return queue, dlq


def messages_on(st: LocalStack, queue_url: str) -> int:
    """Every message on the queue: visible, in flight and delayed."""
    attributes = st.client("sqs").get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return sum(int(value) for value in attributes.values())


def notifications_checked(st: LocalStack) -> None:
    """Wait until every notification the webhook queued (its HTTP answer came first) was checked:
    its queued stage took it off the notifications queue (a failed check stays on it)."""
    wait_for("the queued notifications checked", lambda: messages_on(st, st.notifications_url) == 0)


def target_status(st: LocalStack, target_id: str, digest: str) -> TargetStatus | None:
    """The target's status if it is at ``digest``, else None."""
    target = state_of(st).targets.get(target_id)
    return target.status if target is not None and target.digest == digest else None


def recorded_status(st: LocalStack, target_id: str, digest: str) -> TargetStatus | None:
    """The target's status at ``digest`` once its history entry is written too, else None: the state
    writes the status first and the history entry just after (``targets.finish``), so a test that
    reads the history after waiting on the status alone can look between the two writes."""
    status = target_status(st, target_id, digest)
    if status is None:
        return None
    recorded = {h.status for h in state_of(st).history.of_target(target_id) if h.digest == digest}
    return status if status.value in recorded else None


def running(st: LocalStack, target_id: str) -> str:
    """The image a target's container runs, read from its cluster's API server."""
    cluster, namespace, kind, name, container = target_id.split("/")
    obj = st.kubes[cluster].get(kind, namespace, name)
    for c in obj["spec"]["template"]["spec"]["containers"]:
        if c["name"] == container:
            return str(c["image"])
    raise KeyError(container)
