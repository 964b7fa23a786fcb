"""The webhook's two stages on the local stack, over HTTP: a delivery is answered once it is queued
(before, and whatever, its check), a refused one is never queued, a check that fails comes back on
its own and rolls the workload once the registry answers, and the chain HTTP -> webhook ->
notifications queue -> webhook -> changes queue -> consumer is one Lambda's loop guard lets through.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from tagpin_local.demo import current_image
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import (
    messages_on,
    notification_body,
    notifications_checked,
    post_notification,
    state_of,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def live() -> Iterator[LocalStack]:
    """Notifications posted by the tests (the registry's own off), the SQS loops on, no poller."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=False, poll_interval=None)) as st:
        assert st.registry is not None
        st.kube.create(deployment("web", "default", f"{st.registry.host}/demo/web:stable", container="web"))
        yield st


def notify(st: LocalStack, digest: str, delivery: str, body: bytes | None = None) -> httpx.Response:
    """``body`` (by default ``notification_body``'s) posted to the webhook, as the registry posts it."""
    return post_notification(st, body if body is not None else notification_body(st, digest, delivery))


def test_the_answer_comes_before_the_check_and_a_failed_check_comes_back(live: LocalStack) -> None:
    assert live.registry is not None
    digest = push_image(live.registry.url, "demo/web", "stable")
    image = f"{live.registry.host}/demo/web:stable"
    live.registry._terminate()  # the registry goes away: no check can succeed now
    try:
        answer = notify(live, digest, "queued-1")
        # answered once queued, though the registry cannot be asked
        assert answer.status_code == 202 and answer.json() == {"queued": 1}
        # checked after the answer: the registry's error recorded, the notification kept to come back
        wait_for(
            "the failed check recorded",
            lambda: (tag := state_of(live).tags.get(image)) is not None and tag.last_error is not None,
        )
        assert messages_on(live, live.notifications_url) == 1
        assert not current_image(live)[0].endswith("@" + digest)
    finally:
        live.registry.reconfigure(None)  # back, same storage and port
    # new containers, in effect: the registry client's breaker (open for a minute after five
    # failures in a row) is not what this test waits for
    live.write_config()
    # the notification comes back on its own (5 s later) and rolls the workload
    wait_for("the workload at the digest", lambda: current_image(live)[0].endswith("@" + digest))
    notifications_checked(live)
    tag = state_of(live).tags.get(image)
    assert tag is not None and tag.digest == digest
    # a failed check is one record reported failed, not a failed invocation
    assert live.webhook_errors == [] and live.consumer_errors == []
    # HTTP -> webhook -> notifications queue -> webhook -> changes queue -> consumer: two webhook
    # invocations in the chain, none stopped by the loop guard (the webhook's is on)
    assert live.loops.longest["webhook"] == 2 and live.loops.dropped == []


def test_a_refused_notification_is_never_queued(live: LocalStack) -> None:
    assert live.registry is not None
    before = messages_on(live, live.notifications_url)
    digest = "sha256:" + "0" * 64
    event = json.loads(notification_body(live, digest, "refused"))["events"][0]
    event["target"]["repository"] = "Demo/Web"  # not a repository name
    for body in (b"{", json.dumps({"events": [event]}).encode()):
        answer = notify(live, digest, "refused", body=body)
        assert answer.status_code == 400, answer.text
    assert messages_on(live, live.notifications_url) == before == 0


def test_a_delivery_sent_twice_rolls_once(live: LocalStack) -> None:
    """The registry's retry of a notification (the same event id) is queued again and checked as a
    duplicate (tests/unit/test_webhooks_dedup.py shows it is not recorded again): one patch."""
    assert live.registry is not None
    digest = push_image(live.registry.url, "demo/web", "stable")
    patches = live.kube.count("PATCH", r"/deployments/web$")
    for _ in range(2):
        assert notify(live, digest, "twice-1").json() == {"queued": 1}
    notifications_checked(live)
    wait_for("the workload at the digest", lambda: current_image(live)[0].endswith("@" + digest))
    wait_for("the changes queue empty", lambda: messages_on(live, live.queue_url) == 0)
    assert live.kube.count("PATCH", r"/deployments/web$") == patches + 1
