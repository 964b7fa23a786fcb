"""The sample events in events/ run through the real handlers (what `sam local invoke -e` would do).

The events name the registry 127.0.0.1:5000 and the token local-dev-webhook-token; the test
points them at the local stack's registry and token, nothing else changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.constants import EVENTS
from tests.support.stack import messages_on, notifications_checked, state_of, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    """A fresh stack per test (each stands alone, in any order): a Deployment default/web runs
    <registry>/demo/web:stable; notifications, polling and the SQS loop off."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=False, poll_interval=None, consume=False)) as st:
        assert st.registry is not None
        st.kube.create(deployment("web", "default", f"{st.registry.host}/demo/web:stable", container="web"))
        yield st


SAMPLE_WEB = "sha256:39798804c29366d66f8bb733d84981a9aef2dbbddc6168690a5730ca42c40ece"  # consumer-sqs.json


def load(name: str, st: LocalStack, web: str | None = None) -> dict:
    """A sample event for this stack's registry and webhook token; ``web``: the digest to put in
    place of the sample's demo/web digest (a real cluster has nodes, so the consumer reads the
    image's platforms from the registry: the digest must be there)."""
    text = (EVENTS / name).read_text()
    text = text.replace("127.0.0.1:5000", st.registry.host).replace(
        "local-dev-webhook-token", st.webhook_token
    )
    return json.loads(text.replace(SAMPLE_WEB, web) if web else text)


def test_consumer_sample_on_fresh_state(stack):
    """First, while the state is empty; the sample's 2025 observation is then the newest known."""
    event = load("consumer-sqs.json", stack, push_image(stack.registry.url, "demo/web", "stable"))
    response = stack.functions["consumer"].invoke(event)
    assert response == {"batchItemFailures": []}
    image = stack.kube.get("Deployment", "default", "web")["spec"]["template"]["spec"]["containers"][0][
        "image"
    ]
    web = json.loads(event["Records"][0]["body"])  # the second record is for demo/api, not followed here
    assert image.endswith("@" + web["digest"])


def test_webhook_sample(stack):
    digest = push_image(stack.registry.url, "demo/web", "stable")
    response = stack.functions["webhook"].invoke(load("webhook-distribution.json", stack))
    assert response["statusCode"] == 202
    # One manifest push (the blob event is dropped), queued; its check comes after the answer.
    assert json.loads(response["body"]) == {"queued": 1}
    notifications_checked(stack)
    # The payload's digest is only a hint: the registry's answer is recorded and enqueued.
    recorded = state_of(stack).tags.get(f"{stack.registry.host}/demo/web:stable")
    assert recorded is not None and recorded.digest == digest
    assert wait_for("the change on the queue", lambda: messages_on(stack, stack.queue_url))


def test_poller_sample(stack):
    push_image(stack.registry.url, "demo/web", "stable")
    result = stack.functions["poller"].invoke(load("poller-scheduled.json", stack))
    assert result["resolved"] == 1 and result["errors"] == 0


def test_consumer_sample_replayed_after_newer_state_changes_nothing(stack):
    """After the webhook recorded a newer digest, the old sample is superseded, not applied."""
    assert stack.functions["consumer"].invoke(load("consumer-sqs.json", stack)) == {"batchItemFailures": []}
    push_image(stack.registry.url, "demo/web", "stable")
    assert stack.functions["webhook"].invoke(load("webhook-distribution.json", stack))["statusCode"] == 202
    notifications_checked(stack)  # the newer digest recorded (the webhook's queued stage)
    before = stack.kube.count("PATCH", r"/deployments/web$")  # sent, not only applied: none is
    assert stack.functions["consumer"].invoke(load("consumer-sqs.json", stack)) == {"batchItemFailures": []}
    assert stack.kube.count("PATCH", r"/deployments/web$") == before
