"""The attestation-only option against the real registry: an index that differs from the last one only
in its BuildKit attestation manifests is no change when ``ignore_attestation_changes`` is on, and is
one when it is off. A change to a platform manifest is always a change."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.domain.config import FollowedImage, Registry, Target
from tagpin.ports.registry import OCI_INDEX, RegistryAccess
from tagpin.ports.state import State, TargetStatus
from tagpin.usecases.attestations import AttestationFilter, platform_manifests
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller
from tagpin_local.oci import push_image
from tagpin_local.registry_server import RegistryServer

from tests.conftest import require_binary
from tests.support.queues import ListQueue

pytestmark = pytest.mark.integration

PLATFORMS = ["linux/amd64", "linux/arm64"]
LAYER = b"the same application bytes"


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryServer]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with RegistryServer() as server:
        yield server


def index(registry: RegistryServer, repository: str, digest: str) -> dict[str, Any]:
    response = httpx.get(f"{registry.url}/v2/{repository}/manifests/{digest}", headers={"Accept": OCI_INDEX})
    response.raise_for_status()
    doc: dict[str, Any] = response.json()
    return doc


def run_scenario(
    registry: RegistryServer, state: State, repository: str, *, ignore: bool
) -> tuple[str, str, ListQueue, Any]:
    """Push an index, poll, let every target run it; push the same image with a provenance
    attestation added; poll again. Returns (first digest, second digest, queue, second summary)."""
    image = f"{registry.host}/{repository}:stable"
    followed = [FollowedImage(image=image, targets=[Target(cluster="c", name="web", container="app")])]
    queue = ListQueue()
    with RegistryClient(access=lambda _h: RegistryAccess(insecure=True)) as client:
        poller = Poller(
            Detector(client, state, queue),
            client,
            state,
            lambda _h: Registry(insecure=True, ignore_attestation_changes=ignore),
        )
        first = push_image(registry.url, repository, "stable", content=LAYER, platforms=PLATFORMS)
        assert poller.run(followed).enqueued == 1
        target_id = followed[0].targets[0].id
        assert state.targets.claim(target_id, image, first, 1, "poll", 2)
        assert state.targets.finish(target_id, first, TargetStatus.APPLIED, 3, trigger="poll")
        assert poller.run(followed).unchanged == 1
        queue.sent.clear()

        second = push_image(
            registry.url, repository, "stable", content=LAYER, platforms=PLATFORMS, attestation=b"build 2"
        )
        summary = poller.run(followed)
    return first, second, queue, summary


def test_the_pushed_indexes_differ_only_in_attestations(registry: RegistryServer) -> None:
    repository = "attest/shape"
    first = push_image(registry.url, repository, "stable", content=LAYER, platforms=PLATFORMS)
    second = push_image(
        registry.url, repository, "stable", content=LAYER, platforms=PLATFORMS, attestation=b"build 2"
    )
    before, after = index(registry, repository, first), index(registry, repository, second)
    assert first != second
    assert len(before["manifests"]) == 2 and len(after["manifests"]) == 4
    assert after["manifests"][:2] == before["manifests"]
    for entry in after["manifests"][2:]:
        assert entry["platform"] == {"architecture": "unknown", "os": "unknown"}
        assert entry["annotations"]["vnd.docker.reference.type"] == "attestation-manifest"
        assert entry["annotations"]["vnd.docker.reference.digest"] in {
            m["digest"] for m in before["manifests"]
        }
    raw = {
        d: httpx.get(f"{registry.url}/v2/{repository}/manifests/{d}", headers={"Accept": OCI_INDEX}).content
        for d in (first, second)
    }
    kept = platform_manifests(raw[first])
    assert kept is not None and len(kept) == 2
    assert platform_manifests(raw[second]) == kept  # the attestations are left out of the comparison


def test_attestation_only_change_is_ignored_when_the_option_is_on(
    registry: RegistryServer, state: State
) -> None:
    first, second, queue, summary = run_scenario(registry, state, "attest/on", ignore=True)
    assert first != second
    assert (summary.ignored, summary.changed, summary.enqueued) == (1, 0, 0)
    assert queue.sent == []
    ignored = [r for r in summary.results if r.outcome == "ignored"]
    assert [(r.digest, r.previous_digest) for r in ignored] == [(second, first)]
    stored = state.tags.get(f"{registry.host}/attest/on:stable")
    assert stored is not None and stored.digest == first  # the workloads keep what they run


def test_attestation_only_change_rolls_when_the_option_is_off(registry: RegistryServer, state: State) -> None:
    _first, second, queue, summary = run_scenario(registry, state, "attest/off", ignore=False)
    assert (summary.ignored, summary.changed, summary.enqueued) == (0, 1, 1)
    assert [(c.move.image, c.move.digest) for c in queue.sent] == [
        (f"{registry.host}/attest/off:stable", second)
    ]


def test_a_platform_change_rolls_even_with_the_option_on(registry: RegistryServer, state: State) -> None:
    _first, _second, queue, _summary = run_scenario(registry, state, "attest/real", ignore=True)
    image = f"{registry.host}/attest/real:stable"
    rebuilt = push_image(
        registry.url, "attest/real", "stable", content=b"new bytes", platforms=PLATFORMS, attestation=b"b3"
    )
    with RegistryClient(access=lambda _h: RegistryAccess(insecure=True)) as client:
        poller = Poller(
            Detector(client, state, queue),
            client,
            state,
            lambda _h: Registry(insecure=True, ignore_attestation_changes=True),
        )
        summary = poller.run(
            [FollowedImage(image=image, targets=[Target(cluster="c", name="web", container="app")])]
        )
    assert (summary.ignored, summary.changed, summary.enqueued) == (0, 1, 1)
    assert [(c.move.image, c.move.digest) for c in queue.sent] == [(image, rebuilt)]


@pytest.mark.parametrize("ignore", [True, False])
def test_the_webhook_path_applies_the_same_filter(
    registry: RegistryServer, state: State, ignore: bool
) -> None:
    """A push notification for an attestation-only change: the same filter as the poller's."""
    repository = f"attest/webhook-{str(ignore).lower()}"
    image = f"{registry.host}/{repository}:stable"
    followed = FollowedImage(image=image, targets=[Target(cluster="c", name="web", container="app")])
    queue = ListQueue()
    settings = Registry(insecure=True, ignore_attestation_changes=ignore)
    with RegistryClient(access=lambda _h: RegistryAccess(insecure=True)) as client:
        detector = Detector(client, state, queue, attestations=AttestationFilter(client, lambda _h: settings))
        first = push_image(registry.url, repository, "stable", content=LAYER, platforms=PLATFORMS)
        assert detector.detect(followed, trigger="webhook", hint_digest=first).enqueued
        second = push_image(
            registry.url, repository, "stable", content=LAYER, platforms=PLATFORMS, attestation=b"build 2"
        )
        queue.sent.clear()
        result = detector.detect(followed, trigger="webhook", hint_digest=second)
    if ignore:
        assert result.outcome == "ignored" and queue.sent == []
        stored = state.tags.get(image)
        assert stored is not None and stored.digest == first
    else:
        assert result.outcome == "changed" and [c.move.digest for c in queue.sent] == [second]
