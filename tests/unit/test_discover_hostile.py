"""A labelled workload's annotations are the cluster's text, up to 256 KB: a version policy or a
containers list that is wrong is noted, and the note quotes a bounded part of it. Before, a 200 KB
policy came back whole in its note (and so in the reconciler's run report, its log line and its
Lambda result: 50 such notes are 10 MB, over Lambda's 6 MB response limit)."""

from __future__ import annotations

from tagpin.domain.annotations import ANNOTATION_CONTAINERS, ANNOTATION_POLICY
from tagpin.domain.kinds import DEFAULT_KIND
from tagpin.ports.workloads import Workload
from tagpin.usecases.discover import discovered_targets

from tests.support.constants import NGINX

HUGE = 200_000


def workload(annotations: dict[str, str]) -> Workload:
    return Workload(
        resource_version="1",
        containers={"app": NGINX},
        init_containers={},
        kind=DEFAULT_KIND,
        namespace="shop",
        name="web",
        annotations=annotations,
    )


def test_a_huge_policy_is_noted_bounded() -> None:
    for policy in (
        "x" * HUGE,
        '{"kind": "semver", "range": "' + "1" * HUGE + '"}',
        "regex/bogus:" + "a" * HUGE,
    ):
        found, notes = discovered_targets("east", workload({ANNOTATION_POLICY: policy}))
        assert found == []
        (note,) = notes
        assert note.startswith("east/shop/Deployment/web/app: not followed: ")
        assert len(note) < 2_000


def test_a_huge_container_name_is_noted_bounded() -> None:
    found, notes = discovered_targets("east", workload({ANNOTATION_CONTAINERS: "app," + "b" * HUGE}))
    assert [t.container for _k, t in found] == ["app"]
    (note,) = notes
    assert "which it does not have" in note and len(note) < 2_000
