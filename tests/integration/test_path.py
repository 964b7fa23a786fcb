"""The path through real parts: the CNCF registry, moto server, a real Kubernetes API server through
the official client, the real handlers invoked with real event shapes."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin_local.lambda_runtime import sqs_event
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

from tests.support.constants import STATE_TABLE
from tests.support.patches import applied_patches
from tests.support.stack import drain

pytestmark = pytest.mark.integration


def image_of(st: LocalStack) -> str:
    return st.kube.get("Deployment", "default", "web")["spec"]["template"]["spec"]["containers"][0]["image"]


def patches(st: LocalStack) -> int:
    """The PATCHes of the Deployment the API server applied (a 409-refused one, sent again after a
    re-read, is not a second patch: tests/support/patches.py)."""
    return applied_patches(st.kube, r"/deployments/web$")


def test_poll_then_consume_pins_the_digest(stack):
    digest = push_image(stack.registry.url, "demo/web", "stable")
    result = stack.run_poller()
    assert result["changed"] == 1 and result["enqueued"] == 1
    drain(stack)
    assert image_of(stack) == f"{stack.registry.host}/demo/web:stable@{digest}"
    annotations = stack.kube.get("Deployment", "default", "web")["spec"]["template"]["metadata"][
        "annotations"
    ]
    assert json.loads(annotations["tagpin.dev/digests"]) == {"web": digest}
    assert annotations["tagpin.dev/trigger"] == "poll"
    # The level is now right: the next poll enqueues nothing.
    assert stack.run_poller()["enqueued"] == 0


def _change_event(st: LocalStack, change: Change, copies: int = 1, body: str | None = None) -> dict:
    messages = [
        {
            "MessageId": str(uuid.uuid4()),
            "ReceiptHandle": str(uuid.uuid4()),
            "Body": body or change.model_dump_json(),
            "MD5OfBody": "0" * 32,
            "Attributes": {
                "ApproximateReceiveCount": "1",
                "SentTimestamp": str(int(time.time() * 1000)),
                "SequenceNumber": str(10**19 + i),
                "MessageGroupId": change.move.image,
                "MessageDeduplicationId": uuid.uuid4().hex,
                "SenderId": "AIDAEXAMPLE",
                "ApproximateFirstReceiveTimestamp": str(int(time.time() * 1000)),
            },
        }
        for i in range(copies)
    ]
    return sqs_event(messages, st.queue_arn)


def test_duplicated_and_replayed_messages_patch_once(stack):
    digest = push_image(stack.registry.url, "demo/web", "stable")
    image = f"{stack.registry.host}/demo/web:stable"
    change = Change(
        move=Move(image=image, digest=digest, observed_at=int(time.time() * 1000), trigger=Trigger.MANUAL)
    )
    before = patches(stack)
    consumer = stack.functions["consumer"]
    # The same change twice in one batch (a duplicate), then again later (a replay).
    assert consumer.invoke(_change_event(stack, change, copies=2)) == {"batchItemFailures": []}
    assert consumer.invoke(_change_event(stack, change)) == {"batchItemFailures": []}
    assert image_of(stack).endswith("@" + digest)
    assert patches(stack) - before == 1


def test_a_change_in_flight_from_before_the_update_is_applied_once(stack):
    """A change a deployed stack sent in the flat shape (before messages carried the move), still
    on the queue when the consumer is updated, is applied; the same move in the new shape after it
    patches nothing more."""
    digest = push_image(stack.registry.url, "demo/web", "stable")
    image = f"{stack.registry.host}/demo/web:stable"
    now = int(time.time() * 1000)
    flat = (
        f'{{"image":"{image}","digest":"{digest}","observed_at":{now},"trigger":"webhook",'
        '"correlation_id":"deployed-1","reconcile_run":null,"changed_at":null,"round":null,"tag":null}'
    )
    move = Move(
        image=image, digest=digest, observed_at=now, trigger=Trigger.WEBHOOK, correlation_id="deployed-1"
    )
    before = patches(stack)
    consumer = stack.functions["consumer"]
    assert consumer.invoke(_change_event(stack, Change(move=move), body=flat)) == {"batchItemFailures": []}
    assert image_of(stack) == f"{image}@{digest}"
    assert consumer.invoke(_change_event(stack, Change(move=move))) == {"batchItemFailures": []}
    assert patches(stack) - before == 1


def test_an_older_digest_never_replaces_a_newer_one(stack):
    image = f"{stack.registry.host}/demo/web:stable"
    old = push_image(stack.registry.url, "demo/web", "stable")
    new = push_image(stack.registry.url, "demo/web", "stable")
    t_new = int(time.time() * 1000)
    t_old = t_new - 1000  # observed a second earlier, delivered later
    consumer = stack.functions["consumer"]
    consumer.invoke(
        _change_event(
            stack, Change(move=Move(image=image, digest=new, observed_at=t_new, trigger=Trigger.POLL))
        )
    )
    assert image_of(stack).endswith("@" + new)
    before = patches(stack)
    # The older observation arrives late (out of order): nothing changes.
    result = consumer.invoke(
        _change_event(
            stack, Change(move=Move(image=image, digest=old, observed_at=t_old, trigger=Trigger.WEBHOOK))
        )
    )
    assert result == {"batchItemFailures": []}
    assert image_of(stack).endswith("@" + new)
    assert patches(stack) == before


def test_registry_down_leaves_the_workload_and_the_next_run_picks_up(stack):
    push_image(stack.registry.url, "demo/web", "stable")  # whatever ran before: a digest to keep
    stack.run_poller()
    drain(stack)
    running = image_of(stack)
    stack.registry._terminate()  # the registry goes away
    try:
        result = stack.run_poller()
        assert result["errors"] == 1 and result["enqueued"] == 0
        drain(stack)
        assert image_of(stack) == running
        state = stack.client("dynamodb").get_item(
            TableName=STATE_TABLE,
            Key={"pk": {"S": f"TAG#{stack.registry.host}/demo/web:stable"}, "sk": {"S": "STATE"}},
        )["Item"]
        assert "last_error" in state and running.endswith(state["digest"]["S"])
    finally:
        stack.registry.reconfigure(None)  # back, same storage and port
    digest = push_image(stack.registry.url, "demo/web", "stable")
    assert stack.run_poller()["enqueued"] == 1
    drain(stack)
    assert image_of(stack).endswith("@" + digest)


def test_an_unreachable_cluster_fails_only_its_record(stack):
    host = stack.registry.host
    document = stack.config_document()
    document["clusters"]["gone"] = {"kubeconfig": {"secret": "tagpin/clusters/gone"}}
    gone_kubeconfig = stack.kube.kubeconfig("gone")
    gone_kubeconfig["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:9"  # nothing listens there
    stack.put_secret("tagpin/clusters/gone", json.dumps(gone_kubeconfig))
    document["images"].append(
        {
            "image": f"{host}/demo/api:stable",
            "targets": [{"cluster": "gone", "name": "api", "container": "api"}],
        }
    )
    stack.write_config(document)
    try:
        web = push_image(stack.registry.url, "demo/web", "stable")
        api = push_image(stack.registry.url, "demo/api", "stable")
        now = int(time.time() * 1000)
        event = _change_event(
            stack,
            Change(
                move=Move(image=f"{host}/demo/web:stable", digest=web, observed_at=now, trigger=Trigger.POLL)
            ),
        )
        event["Records"] += _change_event(
            stack,
            Change(
                move=Move(image=f"{host}/demo/api:stable", digest=api, observed_at=now, trigger=Trigger.POLL)
            ),
        )["Records"]
        result = stack.functions["consumer"].invoke(event)
        assert result["batchItemFailures"] == [{"itemIdentifier": event["Records"][1]["messageId"]}]
        assert image_of(stack).endswith("@" + web)
        target = stack.client("dynamodb").get_item(
            TableName=STATE_TABLE,
            Key={"pk": {"S": "TARGET#gone/default/Deployment/api/api"}, "sk": {"S": "STATE"}},
        )["Item"]
        assert target["status"]["S"] == "failed" and "unreachable" in target["detail"]["S"].lower()
    finally:
        stack.write_config()


def test_a_failing_message_goes_to_the_dead_letter_queue(stack):
    """A record that keeps failing is redelivered and then dead-lettered, never dropped."""
    sqs = stack.client("sqs")
    sqs.send_message(
        QueueUrl=stack.queue_url,
        MessageBody='{"image": "not json',
        MessageGroupId="g",
        MessageDeduplicationId="bad1",
    )
    deadline = time.monotonic() + 3 * (stack.options.visibility_timeout + 2) + 10
    while time.monotonic() < deadline:
        stack.consume_once(wait_s=1)
        # only ours: the module's tests share the queues (another record may be dead-lettered too)
        dead = sqs.receive_message(
            QueueUrl=stack.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=0
        ).get("Messages", [])
        if any(m["Body"] == '{"image": "not json' for m in dead):
            return
    pytest.fail("the poison message never reached the dead-letter queue")


def test_a_tag_returning_to_an_earlier_digest_rolls_back_to_it(stack):
    """B -> C -> B within the idempotency window: the return to B is a new change, applied."""
    b = push_image(stack.registry.url, "demo/web", "stable", content=b"image B")
    stack.run_poller()
    drain(stack)
    assert image_of(stack).endswith("@" + b)
    c = push_image(stack.registry.url, "demo/web", "stable", content=b"image C")
    stack.run_poller()
    drain(stack)
    assert image_of(stack).endswith("@" + c)
    assert push_image(stack.registry.url, "demo/web", "stable", content=b"image B") == b
    assert stack.run_poller()["enqueued"] == 1
    drain(stack)
    assert image_of(stack).endswith("@" + b)
