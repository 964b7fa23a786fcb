"""The webhook's two kinds of invocation scale apart on the local stack, as on Lambda: its
notifications queue's event source runs as many checks at once as the template's MaximumConcurrency,
in containers of their own, so a registry's HTTP delivery is answered even while every check is
busy (here: each waiting on a registry that stopped answering)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from tagpin_local.cfn import load_template
from tagpin_local.lambda_runtime import REPO, trigger
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import notify
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def live() -> Iterator[LocalStack]:
    """The notifications queue's event source on (the template's concurrency), nothing else: the
    registry's own notifications, the consumer's loop and the poller off."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=False, poll_interval=None, consume=False)) as st:
        yield st


class InFlight:
    """The webhook's invocations under way, by what invoked them (``trigger``: "http", "sqs")."""

    def __init__(self, function: Any) -> None:
        self.running = {"http": 0, "sqs": 0}
        self.finished = {"http": 0, "sqs": 0}
        self._lock = threading.Lock()
        invoke = function.invoke

        def counted(event: dict[str, Any]) -> Any:
            kind = trigger(event)
            with self._lock:
                self.running[kind] += 1
            try:
                return invoke(event)
            finally:
                with self._lock:
                    self.running[kind] -= 1
                    self.finished[kind] += 1

        function.invoke = counted

    def checking(self, n: int) -> Callable[[], bool]:
        """Whether ``n`` checks (event source batches) are under way."""
        return lambda: self.running["sqs"] == n


def deliver(st: LocalStack, n: int) -> httpx.Response:
    """A notification of demo/web:stable at a digest of its own."""
    return notify(st, "sha256:" + f"{n:x}" * 64, f"busy-{n}")


def test_the_checks_run_as_the_templates_event_source_does(live: LocalStack) -> None:
    events = load_template(REPO / "template.yaml")["Resources"]["WebhookFunction"]["Properties"]["Events"]
    maximum = events["Notifications"]["Properties"]["ScalingConfig"]["MaximumConcurrency"]
    source = live.sources["notifications"]
    assert (source.function, source.queue_url) == ("webhook", live.notifications_url)
    assert source.concurrency == maximum
    # the HTTP calls' containers, and one for each batch of checks at once
    assert live.functions["webhook"].containers == live.options.containers + maximum


def test_an_http_delivery_is_answered_while_every_check_container_is_busy(live: LocalStack) -> None:
    assert live.registry is not None and live.registry.pid is not None
    checks = live.sources["notifications"].concurrency
    webhook = InFlight(live.functions["webhook"])
    os.kill(live.registry.pid, signal.SIGSTOP)  # it still accepts connections, and answers nothing
    try:
        for n in range(1, checks + 1):  # one check after the other, each waiting on the registry
            assert deliver(live, n).status_code == 202
            wait_for(f"{n} checks under way", webhook.checking(n))
        assert webhook.finished["sqs"] == 0
        answer = deliver(live, checks + 1)
        # answered (queued) while every check the event source may run at once is still under way
        busy, done = webhook.running["sqs"], webhook.finished["sqs"]
        assert answer.status_code == 202 and answer.json() == {"queued": 1}, answer.text
        assert (busy, done) == (checks, 0), "a check ended before the delivery was answered"
    finally:
        os.kill(live.registry.pid, signal.SIGCONT)
    wait_for("the checks ended", lambda: webhook.running["sqs"] == 0 and webhook.finished["sqs"] >= checks)


def test_a_check_waiting_on_a_silent_registry_ends_before_the_functions_timeout(live: LocalStack) -> None:
    """Lambda stops a function at its Timeout and fails the whole batch, the claims it made kept
    (their retries would be counted duplicates): the check gives a silent registry up while the
    invocation still has its reserve, reports its record failed, and the record comes back."""
    assert live.registry is not None and live.registry.pid is not None
    push_image(live.registry.url, "demo/web", "stable")
    function = live.functions["webhook"]
    ours: list[tuple[float, float, Any]] = []  # (began, ended, what the invocation answered)
    invoke = function.invoke

    def timed(event: dict[str, Any]) -> Any:
        began = time.monotonic()
        answer = invoke(event)
        if trigger(event) == "sqs" and any("silent-1" in r.get("body", "") for r in event["Records"]):
            ours.append((began, time.monotonic(), answer))
        return answer

    function.invoke = timed
    try:
        os.kill(live.registry.pid, signal.SIGSTOP)  # it accepts connections, and answers nothing
        try:
            assert notify(live, "sha256:" + "5" * 64, "silent-1").status_code == 202
            wait_for("the check given up", lambda: ours, deadline_s=2 * function.timeout_s)
        finally:
            os.kill(live.registry.pid, signal.SIGCONT)
        began, ended, answer = ours[0]
        assert ended - began < function.timeout_s, "the check ran past the function's Timeout"
        assert len(answer["batchItemFailures"]) == 1, answer
        wait_for("the notification checked once the registry answers", lambda: len(ours) > 1)
        assert ours[-1][2]["batchItemFailures"] == [], ours[-1]
    finally:
        function.invoke = invoke
