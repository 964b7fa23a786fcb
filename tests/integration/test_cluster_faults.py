"""A transient Kubernetes API failure costs seconds, never the change: the real poller, consumer and
SQS loop on the local stack, a Deployment in a real API server, and faults injected before it (the
front).

- one 500 on the PATCH: retried inside the invocation (no redelivery), applied within 3 s;
- three 500s, or two 429s (with Retry-After): applied within 15 s;
- the API closes every connection for 20 s: applied within 30 s of its return;
- the API answers 503 for 60 s: applied within 60 s of its return;
and in every case nothing is dead-lettered and the workload is rolled once (one new revision).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin.domain.messages import Change, parse_message
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary

pytestmark = pytest.mark.integration
REVISION = "deployment.kubernetes.io/revision"


@pytest.fixture(scope="module")
def live() -> Iterator[LocalStack]:
    """The SQS loop on (as Lambda's event source), notifications and polling off: each test pushes
    and runs the poller itself."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=False, poll_interval=None, consume=True)) as st:
        assert st.registry is not None
        st.kube.create(deployment("web", "default", f"{st.registry.host}/demo/web:stable", container="web"))
        yield st


def image(st: LocalStack) -> str:
    return str(
        st.kube.get("Deployment", "default", "web")["spec"]["template"]["spec"]["containers"][0]["image"]
    )


def revision(st: LocalStack, timeout: float = 30) -> int:
    """The Deployment's revision once the deployment controller has seen its latest spec: the real
    controller writes the annotation a moment after a patch, not with it (under load, seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        live = st.kube.get("Deployment", "default", "web")
        seen = (live.get("status") or {}).get("observedGeneration", 0) >= live["metadata"]["generation"]
        if seen:
            return int((live["metadata"].get("annotations") or {}).get(REVISION, "0"))
        # said here, not as a later assertion's wrong revision: the controller never saw the spec
        assert time.monotonic() < deadline, (
            f"generation {live['metadata']['generation']} not observed in {timeout} s: {live.get('status')}"
        )
        time.sleep(0.05)


def dead_letters(st: LocalStack) -> int:
    attributes = st.client("sqs").get_queue_attributes(
        QueueUrl=st.dlq_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def roll(st: LocalStack, timeout: float) -> tuple[str, float]:
    """Push a new digest, poll once; seconds from the poll to the Deployment running it."""
    assert st.registry is not None
    digest = push_image(st.registry.url, "demo/web", "stable")
    started = time.monotonic()
    st.run_poller()
    while not image(st).endswith("@" + digest):
        if time.monotonic() - started > timeout:
            pytest.fail(f"not applied within {timeout:.0f} s: {image(st)}")
        time.sleep(0.05)
    return digest, time.monotonic() - started


@pytest.fixture(autouse=True)
def settled(live: LocalStack) -> Iterator[None]:
    """Each test starts from a rolled-out Deployment and leaves no fault behind."""
    roll(live, timeout=30)
    yield
    live.kube.clear_faults()
    live.kube.set_down(False)


def test_one_500_is_retried_in_the_invocation(live: LocalStack, monkeypatch: pytest.MonkeyPatch) -> None:
    before = revision(live)
    consumer = live.functions["consumer"]
    delivered: list[str] = []  # the changes the consumer was given (verifications share the queue)

    def invoke(event: dict[str, Any], invoke: Any = consumer.invoke) -> Any:
        for record in event.get("Records", []):
            message = parse_message(record["body"])
            if isinstance(message, Change):
                delivered.append(message.move.digest)
        return invoke(event)

    monkeypatch.setattr(consumer, "invoke", invoke)
    fault = live.kube.inject("PATCH", "/deployments/web$", status=500, times=1)
    digest, elapsed = roll(live, timeout=10)
    assert fault.hits == 1 and elapsed < 3, f"{elapsed:.1f} s"
    assert delivered == [digest]  # no redelivery
    assert revision(live) == before + 1 and dead_letters(live) == 0


@pytest.mark.parametrize(("status", "times"), [(500, 3), (429, 2)])
def test_a_few_transient_answers_cost_seconds(live: LocalStack, status: int, times: int) -> None:
    before = revision(live)
    fault = live.kube.inject("PATCH", "/deployments/web$", status=status, times=times)
    _digest, elapsed = roll(live, timeout=30)
    assert fault.hits == times and elapsed < 15, f"{elapsed:.1f} s"
    assert revision(live) == before + 1 and dead_letters(live) == 0


@pytest.mark.parametrize(("mode", "down_s", "within_s"), [("close", 20.0, 30.0), ("503", 60.0, 60.0)])
def test_an_outage_is_outlasted_without_a_dead_letter(
    live: LocalStack, mode: str, down_s: float, within_s: float
) -> None:
    before = revision(live)
    live.kube.set_down(True, mode=mode)
    back = threading.Timer(down_s, live.kube.set_down, args=(False,))
    back.start()
    try:
        _digest, elapsed = roll(live, timeout=down_s + within_s + 5)
    finally:
        back.cancel()
        live.kube.set_down(False)
    assert elapsed - down_s < within_s, f"applied {elapsed - down_s:.1f} s after the API came back"
    assert revision(live) == before + 1 and dead_letters(live) == 0
