"""The first run of a deployed stack: before the configuration parameter and the webhook secret
exist, every function waits quietly (no function error, so no error alarm), the webhook answers
503 naming what is missing and enqueues nothing; once the configuration is pushed, the same
stack rolls a push through without a restart.

The real handlers on the local stack (moto server, the real registry with notifications, the SQS
loop, a real Kubernetes control plane)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from tagpin import wiring
from tagpin_local.demo import current_image
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import CONFIG_PARAMETER, WEBHOOK_SECRET, LocalStack, StackOptions

from tests.conftest import require_binary

pytestmark = pytest.mark.e2e


@pytest.fixture
def fresh() -> Iterator[LocalStack]:
    """A stack whose configuration parameter and webhook secret were never written: one per test,
    so that each stands alone (in any order)."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=True, poll_interval=None, consume=False)) as st:
        assert st.registry is not None
        st.kube.create(deployment("web", "default", f"{st.registry.host}/demo/web:stable", container="web"))
        st.client("ssm").delete_parameter(Name=CONFIG_PARAMETER)
        st.delete_secret(WEBHOOK_SECRET)
        wiring.reset()
        yield st


def queued(st: LocalStack) -> int:
    attributes = st.client("sqs").get_queue_attributes(
        QueueUrl=st.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_before_configuration_nothing_fails_and_nothing_is_enqueued(fresh: LocalStack) -> None:
    st = fresh
    assert st.registry is not None
    poll = st.run_poller()
    assert poll["configured"] is False and CONFIG_PARAMETER in poll["reason"]
    reconcile = st.run_reconciler()
    assert reconcile["configured"] is False

    response = httpx.post(
        f"{st.webhook_url}/distribution",
        headers={"Authorization": f"Bearer {st.webhook_token}", "Content-Type": "application/json"},
        content=b'{"events": []}',
    )
    assert response.status_code == 503
    error = response.json()["error"]
    assert "not configured yet" in error and "webhook secret" in error
    assert queued(st) == 0

    # A message that arrived anyway (a redrive, say) waits: reported failed, no function error.
    st.client("sqs").send_message(
        QueueUrl=st.queue_url,
        MessageBody=json.dumps(
            {
                "image": f"{st.registry.host}/demo/web:stable",
                "digest": "sha256:" + "a" * 64,
                "observed_at": 1,
                "trigger": "manual",
            }
        ),
        MessageGroupId="first-run",
        MessageDeduplicationId="first-run",
    )
    assert st.consume_once(wait_s=1) == 1
    assert st.consumer_errors == []
    assert (
        queued(st)
        + int(
            st.client("sqs").get_queue_attributes(
                QueueUrl=st.queue_url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
            )["Attributes"]["ApproximateNumberOfMessagesNotVisible"]
        )
        == 1
    )  # still there, for a later delivery


def test_once_configured_a_push_rolls(fresh: LocalStack) -> None:
    st = fresh
    assert st.registry is not None
    st.client("sqs").purge_queue(QueueUrl=st.queue_url)
    st.put_secret(WEBHOOK_SECRET, json.dumps({"distribution": st.webhook_token}))
    st.write_config()  # what `tagpin config push` does
    digest = push_image(st.registry.url, "demo/web", "stable")  # the registry notifies the webhook
    deadline = time.monotonic() + 20
    while not current_image(st)[0].endswith("@" + digest) and time.monotonic() < deadline:
        st.consume_once(wait_s=1)
    assert current_image(st)[0].endswith("@" + digest)
    assert st.consumer_errors == []
    assert st.run_poller()["enqueued"] == 0
