"""The webhook's two stages on the local stack, over HTTP: a delivery is answered once it is queued
(before, and whatever, its check), a refused one is never queued, a check that fails comes back on
its own and rolls the workload once the registry answers, and the chain HTTP -> webhook ->
notifications queue -> webhook -> changes queue -> consumer is one Lambda's loop guard lets through.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin_local.demo import current_image
from tagpin_local.lambda_runtime import trigger
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

from tests.support.patches import applied_patches
from tests.support.stack import (
    messages_on,
    notifications_checked,
    notify,
    notify_body,
    state_of,
    wait_for,
    webhook_stack,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def live() -> Iterator[LocalStack]:
    """Notifications posted by the tests (the registry's own off), the SQS loops on, no poller."""
    with webhook_stack(notifications=False) as st:
        yield st


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
    # new containers, in effect: the failed check asked the registry five times (the Detector's
    # confirm delays), which opens the registry client's breaker for a minute in its container
    # (its checks fail at once meanwhile and come back later); not what this test waits for
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
    event = json.loads(notify_body(live, digest, "refused"))["events"][0]
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
    patches = applied_patches(live.kube, r"/deployments/web$")
    for _ in range(2):
        assert notify(live, digest, "twice-1").json() == {"queued": 1}
    notifications_checked(live)
    wait_for("the workload at the digest", lambda: current_image(live)[0].endswith("@" + digest))
    wait_for("the changes queue empty", lambda: messages_on(live, live.queue_url) == 0)
    assert applied_patches(live.kube, r"/deployments/web$") == patches + 1


def test_a_check_is_not_received_again_while_it_runs(live: LocalStack) -> None:
    """A check lasts as long as its registry makes it (here one that accepts connections and
    answers nothing: until the invocation's reserve, seconds past the local stack's default
    visibility timeout). Its record stays hidden meanwhile, as Lambda requires of an event source's
    queue (a VisibilityTimeout of at least the function's Timeout). Received again while it ran, it
    would be checked a second time beside the first (its claim is the same message's:
    tests/unit/test_webhook_received_twice.py), a registry request and a Lambda run more."""
    assert live.registry is not None and live.registry.pid is not None
    digest = push_image(live.registry.url, "demo/web", "stable")
    function = live.functions["webhook"]
    began: list[float] = []  # each check of this notification, as it begins
    ended: list[float] = []  # and as it ends
    invoke = function.invoke

    def timed(event: dict[str, Any]) -> Any:
        ours = trigger(event) == "sqs" and any("outlasting-1" in r.get("body", "") for r in event["Records"])
        if ours:
            began.append(time.monotonic())
        try:
            return invoke(event)
        finally:
            if ours:
                ended.append(time.monotonic())

    function.invoke = timed
    try:
        os.kill(live.registry.pid, signal.SIGSTOP)
        try:
            assert notify(live, digest, "outlasting-1").json() == {"queued": 1}
            wait_for("the check given up", lambda: ended, deadline_s=2 * function.timeout_s)
        finally:
            os.kill(live.registry.pid, signal.SIGCONT)
        assert ended[0] - began[0] > live.options.visibility_timeout  # it outlasted the default
        assert len(began) == 1, "received again while its check ran"
        # the notification comes back after its failed check (5 s later) and rolls the workload
        wait_for("the workload at the digest", lambda: current_image(live)[0].endswith("@" + digest))
        notifications_checked(live)
    finally:
        function.invoke = invoke
