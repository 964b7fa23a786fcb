"""A hung cluster costs the consumer one timeout, not the batch: the real consumer handler, a moto
server, the real registry and two Kubernetes control planes, one of which stops answering (every
request waits longer than the client's read timeout).

- The other cluster's changes in the same batch are applied (their message groups are worked side
  by side with the hung one's); only the hung cluster's records fail (and go back to the queue).
- With too little time left for another record, it is not started: it is reported failed, instead
  of the invocation running into the Lambda timeout and failing every record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from tagpin import wiring
from tagpin_local.kube.manifests import deployment
from tagpin_local.lambda_runtime import LocalFunction, sqs_event
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import state_of

pytestmark = pytest.mark.integration

HANG_S = 12.0  # longer than the client's read timeout (adapters.kubernetes.workloads.REQUEST_TIMEOUT)


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=False, poll_interval=None, consume=False, clusters=["east"])
    with LocalStack(options) as stack:
        assert stack.registry is not None
        document = stack.config_document()
        for cluster, name in (("east", "e1"), ("east", "e2"), ("local", "l1"), ("local", "l2")):
            image = f"{stack.registry.host}/budget/{name}:stable"
            target = {"cluster": cluster, "namespace": "default", "name": name, "container": "app"}
            document["images"].append({"image": image, "targets": [target]})
            stack.kubes[cluster].create(deployment(name, "default", image))
            push_image(stack.registry.url, f"budget/{name}", "stable")
        stack.write_config(document)
        yield stack


def batch(st: LocalStack, names: list[str]) -> list[dict[str, Any]]:
    """One change per tag (the poller's, for the digest each tag points to now), received in
    ``names`` order as one SQS batch; older changes still on the queue are deleted."""
    assert st.registry is not None
    st.run_poller()
    sqs = st.client("sqs")
    state = state_of(st)
    current = {name: state.tags.get(f"{st.registry.host}/budget/{name}:stable") for name in names}
    wanted: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 15
    while len(wanted) < len(names) and time.monotonic() < deadline:
        for message in sqs.receive_message(
            QueueUrl=st.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["All"],
        ).get("Messages", []):
            move = json.loads(message["Body"])["move"]
            name = move["image"].rsplit("/", 1)[-1].split(":")[0]
            tag = current.get(name)
            if tag is not None and move["digest"] == tag.digest:
                wanted[name] = message
            else:  # another test's change, or a tag not in this batch
                sqs.delete_message(QueueUrl=st.queue_url, ReceiptHandle=message["ReceiptHandle"])
    assert set(wanted) == set(names), f"changes received: {sorted(wanted)}"
    return [wanted[name] for name in names]


def invoke(st: LocalStack, messages: list[dict[str, Any]], timeout_s: float) -> tuple[set[str], float]:
    """Invoke the consumer as Lambda's SQS event source does; the records it reports failed (all of
    them when it raised: Lambda then delivers the whole batch again)."""
    consumer = LocalFunction("consumer", timeout_s=timeout_s)
    started = time.monotonic()
    try:
        response = consumer.invoke(sqs_event(messages, st.queue_arn)) or {}
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
    except BatchProcessingError:
        failed = {m["MessageId"] for m in messages}
    return failed, time.monotonic() - started


def image_of(st: LocalStack, cluster: str, name: str) -> str:
    return str(
        st.kubes[cluster].get("Deployment", "default", name)["spec"]["template"]["spec"]["containers"][0][
            "image"
        ]
    )


def behind(st: LocalStack, names: list[str]) -> None:
    """Each workload of ``names`` back on its floating tag and a new digest pushed to the tag, so
    that each is behind whatever an earlier test applied; a new container (``wiring.reset``: no
    cluster skipped after an earlier test's timeouts)."""
    assert st.registry is not None
    for name in names:
        cluster = "east" if name.startswith("e") else "local"
        container = {"name": "app", "image": f"{st.registry.host}/budget/{name}:stable"}
        st.kubes[cluster].patch(
            "Deployment", "default", name, {"spec": {"template": {"spec": {"containers": [container]}}}}
        )
        push_image(st.registry.url, f"budget/{name}", "stable")
    wiring.reset()


def test_a_hung_cluster_fails_only_its_records_and_costs_one_timeout(st: LocalStack) -> None:
    behind(st, ["e1", "l1", "e2", "l2"])
    east = st.kubes["east"]
    east.inject("*", "/apis/apps/", status=None, times=None, delay=HANG_S)
    try:
        messages = batch(st, ["e1", "l1", "e2", "l2"])
        failed, elapsed = invoke(st, messages, timeout_s=60)
    finally:
        east.clear_faults()
    ids = {name: m["MessageId"] for name, m in zip(["e1", "l1", "e2", "l2"], messages, strict=True)}
    assert failed == {ids["e1"], ids["e2"]}
    assert "@sha256:" in image_of(st, "local", "l1") and "@sha256:" in image_of(st, "local", "l2")
    assert "@" not in image_of(st, "east", "e1") and "@" not in image_of(st, "east", "e2")
    # e1 waited for the read timeout; e2 beside it, or not asked (the cluster is skipped for a while).
    assert elapsed < 2 * HANG_S, f"{elapsed:.1f} s"


def test_a_record_is_not_started_without_time_for_it(st: LocalStack) -> None:
    """Timeout 35 s and a 30 s reserve; the east cluster answers, slowly (6 s a request, under the
    client's read timeout). e1's change is applied in about 12 s; the record behind it in its
    message group (the same change again) is then not started: the invocation ends in time and
    reports it failed, nothing is lost. l1, another group, is applied meanwhile, though it comes
    last in the batch."""
    behind(st, ["e1", "l1"])
    east = st.kubes["east"]
    east.inject("*", "/apis/apps/", status=None, times=None, delay=6.0)
    try:
        e1, l1 = batch(st, ["e1", "l1"])
        again = {**e1, "MessageId": e1["MessageId"] + "-again"}  # e1's group, after it
        assert e1["Attributes"]["MessageGroupId"] == again["Attributes"]["MessageGroupId"]
        # l1 last: worked one after the other it would not be started either (out of time)
        failed, elapsed = invoke(st, [e1, again, l1], timeout_s=35)
    finally:
        east.clear_faults()
    assert elapsed < 35, f"{elapsed:.1f} s: the invocation would have timed out"
    assert failed == {again["MessageId"]}  # e1 and l1 applied; the record behind e1 not started
    assert "@sha256:" in image_of(st, "east", "e1") and "@sha256:" in image_of(st, "local", "l1")
