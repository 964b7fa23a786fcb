"""A warm poller starts where it left the cursor before reading it (tagpin.usecases.poll): when
another run moved the cursor meanwhile, the chunks it started are cancelled in the real registry
client, mid-flight, and the run goes on from the cursor read, every tag recorded once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.domain.config import FollowedImage, Registry, Target
from tagpin.domain.poll_pass import PollPass
from tagpin.ports.registry import RegistryAccess
from tagpin.ports.state import State
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller
from tagpin_local.faultproxy import Fault, FaultProxy
from tagpin_local.oci import push_image
from tagpin_local.registry_server import RegistryServer

from tests.conftest import require_binary
from tests.support.queues import ListQueue

pytestmark = pytest.mark.integration

NAMES = [f"svc{i}" for i in range(8)]


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryServer]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with RegistryServer() as server:
        for n in NAMES:
            push_image(server.url, f"moved/{n}", "stable", content=b"cursor")
        yield server


def test_a_cursor_moved_by_another_run_cancels_the_chunks_started_before_it_was_read(
    registry: RegistryServer, state: State
) -> None:
    with FaultProxy(registry.url) as proxy:
        items = [
            FollowedImage(
                image=f"{proxy.host}/moved/{n}:stable", targets=[Target(cluster="c", name=n, container="app")]
            )
            for n in NAMES
        ]
        queue = ListQueue()
        with RegistryClient(
            access=lambda _h: RegistryAccess(insecure=True), max_concurrency=2, per_registry=2
        ) as client:
            poller = Poller(
                Detector(client, state, queue), client, state, lambda _h: Registry(insecure=True), chunk=2
            )
            first = poller.run(items)
            assert (first.resolved, first.cursor) == (8, None)
            state.cursor.put(PollPass(items[5].image, 1), 1)  # another invocation ran out of time there
            proxy.add(Fault("delay", seconds=0.2))  # the chunks started are still asking when it is read
            proxy.requests.clear()
            second = poller.run(items)
    # nothing is settled (no target runs the digests): every tag is observed, once, from the cursor
    assert [r.image for r in second.results] == [f.image for f in items[5:] + items[:5]]
    assert (second.resolved, second.cursor) == (8, None) and state.cursor.get() == PollPass()
    asked = [path for _method, path, _what in proxy.requests]
    assert any("/svc0/" in p for p in asked[:2])  # the chunk from where this poller left the cursor
