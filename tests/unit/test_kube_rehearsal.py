"""A change rehearsed on a cluster's client at a container's start (tagpin.warming, the consumer's):
the adapter's read and patch of a workload of each kind run through the Kubernetes client, answered
in the rehearsing thread; nothing leaves, and another thread's requests are sent as ever. That the
first change then compiles none of the client's regular expressions is
tests/integration/test_warmed_first_call.py's (in a process of its own)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration
from tagpin.adapters.kubernetes.rehearsal import install, rehearse_change, rehearsing
from tagpin.adapters.kubernetes.workloads import KubeWorkloads
from tagpin.domain.kinds import PROFILES, Kind


def recorded() -> tuple[ApiClient, list[tuple[Any, ...]]]:
    api = ApiClient(Configuration(host="https://127.0.0.1:9"))
    sent: list[tuple[Any, ...]] = []
    api.rest_client.pool_manager.request = lambda *a, **k: sent.append(a)  # type: ignore[method-assign]
    return api, sent


@pytest.mark.parametrize("kind", [Kind(p.kind) for p in PROFILES])
def test_a_rehearsed_change_reads_and_patches_through_the_client_and_sends_nothing(kind: Kind) -> None:
    api, sent = recorded()
    rehearse_change(KubeWorkloads(api), kind)  # raises when the answer is not read as a workload
    assert sent == []


def test_another_threads_requests_are_sent_while_one_rehearses() -> None:
    api, sent = recorded()
    install(api)
    install(api)  # once per client: the second wraps nothing
    with rehearsing(b"{}"):
        answered = api.rest_client.pool_manager.request("GET", "https://127.0.0.1:9/api")
        other = threading.Thread(
            target=api.rest_client.pool_manager.request, args=("GET", "https://127.0.0.1:9/x")
        )
        other.start()
        other.join()
    assert answered.status == 200 and answered.data == b"{}"
    assert sent == [("GET", "https://127.0.0.1:9/x")]
    api.rest_client.pool_manager.request("GET", "https://127.0.0.1:9/y")  # after the rehearsal: sent
    assert sent[-1] == ("GET", "https://127.0.0.1:9/y")
