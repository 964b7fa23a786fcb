"""The local runtime starts a container the way provisioned concurrency does: the handler loaded and
what its first invocation would build built (tagpin.warming), so that the first push after a start costs
what a warm one does; TAGPIN_LOCAL_WARM=0 leaves it to the first invocation (bench/latency.py
measures both)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tagpin import wiring
from tagpin_local.lambda_runtime import LocalFunction

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
    "TAGPIN_STATE_TABLE": "tagpin-state",
    "TAGPIN_IDEMPOTENCY_TABLE": "tagpin-idempotency",
    "TAGPIN_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/tagpin-changes.fifo",
    "TAGPIN_DEAD_LETTER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/tagpin-dlq.fifo",
    "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook",
    "TAGPIN_NOTIFICATIONS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/tagpin-notifications",
}


@pytest.fixture
def consumer_env(aws: None, monkeypatch: pytest.MonkeyPatch) -> object:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    wiring.reset()
    yield
    wiring.reset()


def test_a_started_consumer_container_has_its_clients_and_kubernetes_client_built(
    consumer_env: object,
) -> None:
    function = LocalFunction("consumer")
    assert wiring.cluster_connector.cache_info().currsize == 1  # the Kubernetes client imported
    assert wiring.applier.cache_info().currsize == 1 and wiring.verifier.cache_info().currsize == 1
    assert function.container_start_s[0] > 0 and function.cold_starts == 1


def test_a_container_left_cold_builds_nothing_before_its_first_invocation(
    consumer_env: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAGPIN_LOCAL_WARM", "0")
    LocalFunction("consumer")
    assert wiring.cluster_connector.cache_info().currsize == 0
    assert wiring.applier.cache_info().currsize == 0


def test_a_started_webhook_container_has_what_resolves_a_pushed_digest_built(consumer_env: object) -> None:
    LocalFunction("webhook")  # its secret missing: warmed as far as it goes, the invocation reports it
    assert wiring.webhook_service.cache_info().currsize == 1
    assert wiring.detector.cache_info().currsize == 1  # the registry client, the change queue's SQS
    assert wiring.channels.cache_info().currsize == 1
    assert wiring.cluster_connector.cache_info().currsize == 0  # a webhook never loads kubernetes


PROBE = """
import os, sys
from moto import mock_aws
os.environ.update({env})
with mock_aws():
    from tagpin_local.lambda_runtime import LocalFunction
    LocalFunction("webhook")
    print("aiohttp" in sys.modules)
"""


@pytest.mark.parametrize(("warm", "loaded"), [("1", "True"), ("0", "False")])
def test_a_started_webhook_container_has_the_registry_http_stack_imported(warm: str, loaded: str) -> None:
    """In a process of its own (another test may have imported aiohttp here): warmed, the webhook's
    container imported it (its first resolve did, ~0.2 s of the first push); left cold, loading the
    handler did not."""
    env = {**ENV, "AWS_DEFAULT_REGION": "us-east-1", "TAGPIN_LOCAL_WARM": warm}
    paths = [str(ROOT), str(ROOT / "tools"), str(ROOT / "layers" / "common")]
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(env=repr(env))],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == loaded


def test_preparing_a_clusters_client_builds_its_validators_and_sends_nothing() -> None:
    """``KubeWorkloads.prepare`` (the consumer's and the reconciler's warming) calls each API method
    the adapter uses with an argument the client refuses: no request leaves (a cluster's API is not
    reached at warming for this). That it builds their validators, so that the first call builds
    none, is tests/integration/test_warmed_first_call.py's (in a process of its own)."""
    from kubernetes.client import ApiClient, Configuration
    from tagpin.adapters.kubernetes.workloads import KubeWorkloads

    configuration = Configuration(host="https://127.0.0.1:9")
    api = ApiClient(configuration)
    sent: list[object] = []
    api.rest_client.pool_manager.request = lambda *a, **k: sent.append((a, k))  # type: ignore[method-assign]
    workloads = KubeWorkloads(api)
    workloads.prepare()
    assert sent == []
