"""Trust gates: the platform check (an index must provide every platform its cluster's nodes run;
the configured platforms decide when the nodes may not be listed), and a blocked digest through the
Applier (not patched, recorded and announced once, a transient refusal tried again)."""

from __future__ import annotations

import json

import pytest
from tagpin.domain.config import Cluster, Target
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.domain.platforms import Platform, index_platforms, missing
from tagpin.ports.registry import OCI_INDEX, RegistryUnavailable
from tagpin.ports.state import State
from tagpin.usecases.apply import Applier
from tagpin.usecases.trust import PlatformGate, TrustGates

from tests.support.clock import FakeClock
from tests.support.cluster import FakeClusters
from tests.support.constants import D1, WEB, WEB_TARGET
from tests.support.registry import ScriptedRegistry
from tests.unit.test_rollout import ROLLOUT_CONFIG, change, clusters  # noqa: F401 (fixture)

AMD, ARM = Platform("linux", "amd64"), Platform("linux", "arm64")


def index(*platforms: str, attestation: bool = True) -> bytes:
    manifests = [
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": f"sha256:{i:064x}",
            "size": 1,
            "platform": dict(zip(("os", "architecture", "variant"), p.split("/"), strict=False)),
        }
        for i, p in enumerate(platforms)
    ]
    if attestation:
        manifests.append(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + "f" * 64,
                "size": 1,
                "platform": {"os": "unknown", "architecture": "unknown"},
            }
        )
    document = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("text", "platform"),
    [
        ("linux/amd64", AMD),
        ("linux/arm64/v8", ARM),
        ("LINUX/ARM64", ARM),
        ("linux/arm/v7", Platform("linux", "arm", "v7")),
    ],
)
def test_platforms_parse_and_normalise(text: str, platform: Platform) -> None:
    assert Platform.parse(text) == platform


@pytest.mark.parametrize("text", ["linux", "linux/", "a/b/c/d", "linux/am d64", ""])
def test_not_a_platform(text: str) -> None:
    with pytest.raises(ValueError, match="not a platform"):
        Platform.parse(text)


def test_an_index_provides_its_entries_not_its_attestations() -> None:
    assert index_platforms(index("linux/amd64", "linux/arm64/v8")) == {AMD, ARM}
    assert index_platforms(b'{"schemaVersion": 2, "config": {}}') is None  # a single manifest
    assert missing([AMD, ARM], [AMD]) == [ARM]
    assert missing([Platform("linux", "arm", "v7")], [Platform("linux", "arm", "v6")]) == [
        Platform("linux", "arm", "v7")
    ]
    assert missing([Platform("linux", "arm")], [Platform("linux", "arm", "v7")]) == []  # no variant asked


def gate(
    registry: ScriptedRegistry, connector: FakeClusters, configured: dict[str, list[str]] | None = None
) -> PlatformGate:
    config = {
        name: Cluster(kubeconfig={"secret": f"tagpin/clusters/{name}"}, platforms=p)
        for name, p in (configured or {}).items()
    }
    return PlatformGate(registry, connector, lambda: config, FakeClock(0, step=1))


def scripted(body: bytes, digest: str = D1) -> ScriptedRegistry:
    registry = ScriptedRegistry()
    registry.manifests[f"127.0.0.1:5000/demo/web@{digest}"] = (OCI_INDEX, body)
    return registry


def test_an_index_without_arm64_is_blocked_where_arm64_nodes_run(clusters: FakeClusters) -> None:  # noqa: F811
    clusters["dev"].node_platforms = frozenset({AMD, ARM})
    target = Target(cluster="dev", namespace="demo", name="web", container="web")
    blocked = gate(scripted(index("linux/amd64")), clusters).check(WEB, D1, target)
    assert blocked is not None and blocked.gate == "platform" and not blocked.transient
    assert "lacks linux/arm64, which the nodes of cluster dev run" in blocked.reason
    clusters["dev"].node_platforms = frozenset({AMD})  # an amd64-only cluster
    assert gate(scripted(index("linux/amd64")), clusters).check(WEB, D1, target) is None


def test_the_configured_platforms_decide_when_nodes_may_not_be_listed(clusters: FakeClusters) -> None:  # noqa: F811
    clusters["dev"].node_platforms = None
    target = Target(cluster="dev", namespace="demo", name="web", container="web")
    blocked = gate(scripted(index("linux/amd64")), clusters, {"dev": ["linux/arm64"]}).check(WEB, D1, target)
    assert blocked is not None and "the configuration of cluster dev" in blocked.reason
    assert (
        gate(scripted(index("linux/amd64")), clusters).check(WEB, D1, target) is None
    )  # unknown: not checked


def test_a_registry_that_cannot_answer_is_tried_again(clusters: FakeClusters) -> None:  # noqa: F811
    clusters["dev"].node_platforms = frozenset({ARM})
    registry = ScriptedRegistry()
    registry.down["127.0.0.1:5000"] = RegistryUnavailable("503", host="127.0.0.1:5000", status=503)
    target = Target(cluster="dev", namespace="demo", name="web", container="web")
    blocked = gate(registry, clusters).check(WEB, D1, target)
    assert blocked is not None and blocked.transient


def test_a_blocked_digest_is_not_patched_and_recorded_once(store: State, clusters: FakeClusters) -> None:  # noqa: F811
    clusters["dev"].node_platforms = frozenset({AMD, ARM})
    applier = Applier(
        followed=lambda: ROLLOUT_CONFIG.followed,
        state=store,
        workloads=clusters,
        clock=FakeClock(1_800_000_000_000, step=1_000),
        trust=TrustGates(platforms=gate(scripted(index("linux/amd64")), clusters)),
    )
    (result,) = [r for r in applier.apply(change()) if r.target == WEB_TARGET]
    assert result.outcome is ApplyOutcome.BLOCKED and "lacks linux/arm64" in (result.detail or "")
    assert clusters["dev"].patches == []
    applier.apply(change())  # again (the next poll): still blocked, recorded once
    notes = [h for h in store.history.of_target(WEB_TARGET) if h.status == "blocked"]
    assert len(notes) == 1
    events = [e.event for e in store.history.of_image(WEB) if e.digest == D1]
    assert events.count("blocked") == 1
