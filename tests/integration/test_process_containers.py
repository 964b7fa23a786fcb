"""The local stack with its function containers as processes (``StackOptions.processes``), as
``bench/concurrency`` runs it: a push goes through the registry's notification, a webhook container,
SQS and a consumer container to the patch, with moto's server in a process of its own too. What a
thread container gives the stack holds for a process container: the configuration the stack writes
reaches it, Lambda's loop guard follows the chain of requests through it. What only a process can
show as Lambda does: a container that exits or does not answer by the function's timeout fails its
invocation, and the next invocation starts a new container.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
from tagpin.ports.state import TargetStatus
from tagpin_local.kube.manifests import deployment
from tagpin_local.lambda_process import FunctionError, ProcessFunction
from tagpin_local.lambda_runtime import scheduled_event
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import target_status, wait_for

pytestmark = pytest.mark.integration

ROLLOUT = {"verify_interval_seconds": 1, "verify_timeout_seconds": 60, "waves": []}


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=True, consume=True, containers=2, processes=True, rollout=ROLLOUT)
    with LocalStack(options) as stack:
        yield stack


def _process(function: object) -> ProcessFunction:
    assert isinstance(function, ProcessFunction)
    return function


def test_a_push_is_patched_through_process_containers(st: LocalStack) -> None:
    assert st.registry is not None
    # Followed from now on: the containers, started with the stack's first configuration, see it.
    image = f"{st.registry.host}/procs/api:stable"
    target = {"cluster": "local", "namespace": "procs", "name": "api", "container": "app"}
    st.options.images = [{"image": image, "targets": [target]}]
    st.write_config()
    st.kube.create(deployment("api", "procs", image))
    digest = push_image(st.registry.url, "procs/api", "stable")

    def pinned() -> bool:
        spec = st.kube.get("Deployment", "procs", "api")["spec"]["template"]
        return bool(spec["spec"]["containers"][0]["image"] == f"{image}@{digest}")

    wait_for("the Deployment pinned to the pushed digest", pinned)
    annotations = st.kube.get("Deployment", "procs", "api")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["tagpin.dev/trigger"] == "webhook"
    wait_for(
        "the rollout verified",
        lambda: target_status(st, "local/procs/Deployment/api/app", digest) is TargetStatus.VERIFIED,
    )
    # The webhook and the consumer ran in processes of their own, none of them this one.
    webhook, consumer = _process(st.functions["webhook"]), _process(st.functions["consumer"])
    assert webhook.invocations >= 1 and consumer.invocations >= 2  # the patch, then its verification
    pids = set(webhook.pids) | set(consumer.pids)
    # two containers each, and the webhook one more per batch of checks its event source runs at once
    checks = st.sources["notifications"].concurrency
    assert os.getpid() not in pids and len(pids) == 4 + checks
    # The verification the consumer container sent to its own queue carried its chain of requests:
    # Lambda's guard saw the consumer invoked twice in it.
    assert st.loops.longest["consumer"] >= 2
    assert st.loops.dropped == []


def test_a_container_that_exits_fails_its_invocation_and_a_new_one_starts(st: LocalStack) -> None:
    poller = _process(st.functions["poller"])  # one container
    (pid,) = poller.pids[-1:]
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(FunctionError) as failed:
        st.run_poller()
    assert failed.value.error_type == "Runtime.ExitError"
    starts = poller.cold_starts
    assert "changed" in st.run_poller()  # a new container (a cold start) ran it
    assert poller.cold_starts == starts + 1
    assert poller.pids[-1] != pid


def test_a_container_that_does_not_answer_by_the_timeout_is_killed(st: LocalStack) -> None:
    function = ProcessFunction("poller", timeout_s=2.0)  # the stack's environment: its moto, its queue
    try:
        (pid,) = function.pids
        os.kill(pid, signal.SIGSTOP)  # it never answers
        with pytest.raises(FunctionError) as failed:
            function.invoke(scheduled_event())
        assert failed.value.error_type == "Sandbox.Timedout"
        assert "Task timed out after 2.00 seconds" in str(failed.value)
        assert function.history[-1].finished - function.history[-1].started >= 2.0
        assert not os.path.exists(f"/proc/{pid}")  # killed and reaped
        assert "changed" in function.invoke(scheduled_event())  # a new container
        assert function.cold_starts == 2
    finally:
        function.close()
