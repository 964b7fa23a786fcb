"""Reconcile: reading what runs (pure), discovery by label (pure), and the Reconciler with fake
clusters, a fake registry, the real Detector and the state table on moto."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.config import Kind, parse_config
from tagpin.domain.kinds.profile import selector_matches
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import ImageRef
from tagpin.ports.state import IndexEntry, State, TargetStatus
from tagpin.ports.workloads import Forbidden, NotFound, Pod, Workload
from tagpin.usecases.detect import Detector
from tagpin.usecases.discover import discovered_targets
from tagpin.usecases.followed import Followed
from tagpin.usecases.reconcile import Reconciler
from tagpin.usecases.running import image_id_digest, running_digest

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0, D1, D2, FOLLOW, NGINX
from tests.support.dying import Crash, Dying
from tests.support.queues import ListQueue
from tests.support.registry import ScriptedRegistry

NGINX_REF = ImageRef.parse(NGINX)
APP = "reg.example.com/team/app:stable"
SIDE = "reg.example.com/team/side:stable"
SEL = {"matchLabels": {"app": "web"}}


def wl(
    name: str,
    containers: dict[str, str],
    *,
    kind: Kind = Kind.DEPLOYMENT,
    namespace: str = "shop",
    init: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    selector: dict[str, Any] | None = None,
) -> Workload:
    return Workload(
        resource_version="1",
        containers=containers,
        init_containers=init or {},
        kind=kind,
        namespace=namespace,
        name=name,
        labels=dict(FOLLOW),
        annotations=annotations or {},
        selector=selector
        if selector is not None
        else ({"matchLabels": {"app": name}} if kind != Kind.CRONJOB else None),
    )


def pod(name: str, labels: dict[str, str], **image_ids: str) -> Pod:
    return Pod("shop", name, labels, dict(image_ids))


# -- imageID ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image_id", "expected"),
    [
        pytest.param(f"docker.io/library/nginx@{D1}", D1, id="full-name"),
        pytest.param(f"nginx@{D1}", D1, id="familiar-name"),
        pytest.param(f"docker-pullable://nginx@{D1}", D1, id="docker-pullable"),
        pytest.param(f"docker-pullable://docker.io/library/nginx@{D1}", D1, id="docker-pullable-full"),
        pytest.param(f"index.docker.io/library/nginx@{D1}", D1, id="legacy-host"),
        pytest.param(D1, None, id="bare-config-id"),
        pytest.param(f"docker://{D1}", None, id="docker-config-id"),
        pytest.param(f"docker.io/library/redis@{D1}", None, id="another-repository"),
        pytest.param("", None, id="empty"),
        pytest.param("nginx@sha256:short", None, id="not-a-digest"),
    ],
)
def test_image_id_digest(image_id, expected):
    assert image_id_digest(image_id, NGINX_REF) == expected


# -- selectors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "api"}, False),
        (
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            {"tier": "b"},
            True,
        ),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}, {}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {"tier": "a"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": "a"}, False),
        ({}, {"app": "web"}, False),  # never guess a workload's pods
        (None, {"app": "web"}, False),
    ],
)
def test_selector_matches(selector, labels, expected):
    assert selector_matches(selector, labels) is expected


# -- what a target runs ----------------------------------------------------------------------------


def test_running_digest_prefers_the_pinned_image_field_and_reads_no_pods():
    def no_pods() -> list[Pod]:
        raise AssertionError("pods read for a pinned image")

    assert running_digest(wl("web", {"web": f"nginx:1.27@{D1}"}), "web", NGINX_REF, no_pods) == (D1, "pinned")


def test_running_digest_from_the_pods_of_the_workload_only():
    pods = [
        pod("web-1", {"app": "web"}, web=f"docker-pullable://nginx@{D1}"),
        pod("web-2", {"app": "web"}, web=f"docker.io/library/nginx@{D1}"),
        pod("other", {"app": "other"}, web=f"nginx@{D0}"),  # another workload's pod
    ]
    assert running_digest(wl("web", {"web": "nginx:1.27"}), "web", NGINX_REF, lambda: pods) == (D1, "pods")


@pytest.mark.parametrize(
    ("pods", "why"),
    [
        ([], "no pods"),
        (
            [pod("a", {"app": "web"}, web=f"nginx@{D1}"), pod("b", {"app": "web"}, web=f"nginx@{D0}")],
            "disagree",
        ),
        ([pod("a", {"app": "web"})], "no digest"),  # pending: no container status yet
        ([pod("a", {"app": "web"}, web=D1)], "no digest"),  # a bare image id
    ],
)
def test_running_digest_unknown_counts_as_behind(pods, why):
    running, how = running_digest(wl("web", {"web": "nginx:1.27"}), "web", NGINX_REF, lambda: pods)
    assert running is None and why in how


def test_running_digest_of_init_containers_cronjobs_and_strangers():
    init = wl("web", {"web": "busybox"}, init={"setup": f"nginx:1.27@{D2}"})
    assert running_digest(init, "setup", NGINX_REF, list) == (D2, "pinned")
    job = wl("nightly", {"job": "nginx:1.27"}, kind=Kind.CRONJOB)
    assert running_digest(job, "job", NGINX_REF, list)[0] is None  # no pods to ask between runs
    other = wl("web", {"web": f"redis:7@{D1}"})
    assert running_digest(other, "web", NGINX_REF, list)[0] is None  # runs another repository
    assert running_digest(other, "missing", NGINX_REF, list)[0] is None


# -- discovery -------------------------------------------------------------------------------------


def test_discovery_takes_every_tagged_container_including_init_containers():
    found, notes = discovered_targets(
        "east", wl("web", {"web": "nginx:1.27", "side": f"{SIDE}@{D1}"}, init={"setup": APP})
    )
    assert {(image, t.id) for image, t in found} == {
        (NGINX, "east/shop/Deployment/web/web"),
        (SIDE, "east/shop/Deployment/web/side"),  # pinned already: the tag is still followed
        (APP, "east/shop/Deployment/web/setup"),
    }
    assert notes == []


def test_discovery_honours_the_containers_annotation_and_pause():
    chosen = wl(
        "web",
        {"web": "nginx:1.27", "debug": "busybox:1"},
        annotations={"tagpin.dev/containers": "web, nope"},
    )
    found, notes = discovered_targets("east", chosen)
    assert [t.container for _, t in found] == ["web"]
    assert any("'nope'" in n for n in notes)
    paused = wl("web", {"web": "nginx:1.27"}, annotations={"tagpin.dev/paused": "true"})
    assert discovered_targets("east", paused) == ([], ["east/shop/Deployment/web: paused"])


def test_discovery_skips_digest_only_images_with_a_note():
    found, notes = discovered_targets("east", wl("web", {"web": f"nginx@{D1}"}))
    assert found == [] and len(notes) == 1 and "east/shop/Deployment/web/web" in notes[0]


# -- the Reconciler --------------------------------------------------------------------------------

RECONCILE_CONFIG = parse_config(
    f"""
clusters:
  east: {{kubeconfig: {{file: /dev/null}}}}
  west: {{kubeconfig: {{file: /dev/null}}}}
  lab: {{kubeconfig: {{file: /dev/null}}}}
images:
  - image: {APP}
    targets:
      - {{cluster: lab, namespace: legacy, name: old, container: app}}
"""
)


class World:
    def __init__(self, store: State) -> None:
        self.store = store
        self.clusters = FakeClusters(east=FakeCluster(), west=FakeCluster(), lab=FakeCluster())
        self.registry = ScriptedRegistry({APP: D1, SIDE: D2, NGINX: D1})
        self.queue = ListQueue()
        self.clock = FakeClock(1_800_000_000_000, step=1_000)
        self.reconciler = Reconciler(
            config=lambda: RECONCILE_CONFIG,
            state=store,
            clusters=self.clusters,
            detector=Detector(self.registry, store, self.queue, clock=self.clock, confirm_delays=()),
            queue=self.queue,
            clock=self.clock,
        )

    def heals(self) -> list[Any]:
        return [c for c in self.queue.sent if c.reconcile_run is not None]


@pytest.fixture
def world(store: State) -> World:
    return World(store)


def test_with_polling_on_only_new_tags_are_resolved_and_steady_runs_write_nothing(store, dynamodb):
    """resolve=False (the poller stores the digests): the first run resolves the tags it has not
    seen; a steady run asks no registry and writes no tag; a digest moved by the poller is healed."""
    world = World(store)
    world.reconciler._resolve = False
    world.clusters["east"].add(wl("web", {"web": f"{APP}@{D1}"}))
    world.reconciler.run("run-1")
    assert sorted(world.registry.calls) == [APP]  # not seen yet: asked once
    world.registry.calls.clear()
    writes: list[str] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        writes.append(params.get("Key", {}).get("pk", {}).get("S", ""))

    dynamodb.meta.events.register("before-parameter-build.dynamodb.UpdateItem", record)
    dynamodb.meta.events.register("before-parameter-build.dynamodb.PutItem", record)
    report = world.reconciler.run("run-2")
    assert world.registry.calls == [] and report.enqueued == 0
    assert sorted(writes) == ["CLUSTER#east", "CLUSTER#lab", "CLUSTER#west"]  # each cluster's last run only
    store.tags.record(APP, D2, world.clock(), Trigger.POLL)  # the poller saw the tag move
    report = world.reconciler.run("run-3")
    assert world.registry.calls == [] and report.behind == ["east/shop/Deployment/web/web"]
    assert [(c.move.digest, c.reconcile_run) for c in world.heals()] == [(D2, "run-3")]


def test_with_polling_on_a_steady_run_reads_the_settled_digests_not_each_tag(store, dynamodb):
    """Once the poller settled a tag's digest, a run whose targets all run it reads no item of that
    tag (only the shards' compact items); a target behind it has its tag read and healed."""
    world = World(store)
    world.reconciler._resolve = False
    world.clusters["east"].add(wl("web", {"web": f"{APP}@{D1}"}), wl("db", {"db": f"{SIDE}@{D2}"}))
    world.reconciler.run("run-1")
    app, side = store.tags.get(APP), store.tags.get(SIDE)
    assert app is not None and side is not None
    assert store.digests.settle(APP, D1, app.changed_at) and store.digests.settle(SIDE, D2, side.changed_at)
    read: list[str] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        for request in params.get("RequestItems", {}).values():
            read.extend(k["pk"]["S"] for k in request.get("Keys", []))
        if "Key" in params:
            read.append(params["Key"]["pk"]["S"])

    dynamodb.meta.events.register("before-parameter-build.dynamodb.BatchGetItem", record)
    dynamodb.meta.events.register("before-parameter-build.dynamodb.GetItem", record)
    report = world.reconciler.run("run-2")
    assert report.enqueued == 0 and read and all(pk.startswith("DIGESTS#") for pk in read)
    world.clusters["east"].add(wl("web", {"web": f"{APP}@{D0}"}))  # it runs another digest now
    read.clear()
    report = world.reconciler.run("run-3")
    assert report.behind == ["east/shop/Deployment/web/web"]
    # its tag's item, and (behind) its own state: had tagpin moved it there, a person changed it
    assert [pk for pk in read if not pk.startswith("DIGESTS#")] == [
        f"TAG#{APP}",
        "TARGET#east/shop/Deployment/web/web",
    ]
    assert [(c.move.image, c.move.digest) for c in world.heals()] == [(APP, D1)]


def test_one_list_per_kind_per_cluster_and_one_resolve_per_tag(world):
    for i in range(30):
        world.clusters["east"].add(wl(f"web{i}", {"web": f"{APP}@{D1}"}))
        world.clusters["west"].add(wl(f"db{i}", {"db": f"{SIDE}@{D2}"}, kind=Kind.STATEFULSET))
    report = world.reconciler.run("run-1")
    assert report.targets == 61 and len(report.added) == 60
    for name in ("east", "west"):
        assert world.clusters[name].calls == [f"list {k.value}" for k in Kind]  # pinned: no pods read
    assert world.clusters["lab"].calls == [*(f"list {k.value}" for k in Kind), "get legacy/old"]
    assert sorted(world.registry.calls) == sorted([APP, SIDE])
    # all pinned to the current digest: nothing is behind, no healing change
    assert report.behind == [] and world.heals() == []
    assert any(
        "lab/legacy/Deployment/old/app: configured, but the workload does not exist" in n
        for n in report.notes
    )


def test_pods_are_listed_once_per_namespace_with_unpinned_targets(world):
    east = world.clusters["east"]
    east.add(wl("a", {"web": APP}), wl("b", {"web": APP}), wl("c", {"web": APP}, namespace="other"))
    east.pod_list = [pod("a-1", {"app": "a"}, web=f"reg.example.com/team/app@{D1}")]
    report = world.reconciler.run("run-1")
    assert east.calls.count("pods shop") == 1 and east.calls.count("pods other") == 1
    # a runs D1 (current); b has no pods and c's namespace none: unknown counts as behind
    assert sorted(report.behind) == ["east/other/Deployment/c/web", "east/shop/Deployment/b/web"]
    (heal,) = world.heals()
    assert (heal.move.image, heal.move.digest, heal.move.trigger, heal.reconcile_run) == (
        APP,
        D1,
        "reconcile",
        "run-1",
    )
    assert heal.move.observed_at == world.store.tags.get(APP).observed_at


def test_a_person_changing_what_tagpin_applied_puts_the_target_on_hold(world, store):
    """A `kubectl rollout undo` (or an image set by hand) after tagpin's patch is not patched back:
    the target is held against the tag's digest, recorded once, until the tag moves or a release."""
    world.clusters["east"].add(wl("web", {"web": f"{SIDE}@{D0}"}))
    target = "east/shop/Deployment/web/web"
    world.reconciler.run("run-1")
    observed_at = store.tags.get(SIDE).observed_at
    assert store.targets.claim(target, SIDE, D2, observed_at, "poll", 1)
    store.targets.finish(target, D2, TargetStatus.APPLIED, 2, trigger="poll")  # the consumer did it
    world.queue.sent.clear()
    report = world.reconciler.run("run-2")  # the workload still runs D0: someone put it back
    assert report.behind == [] and report.held == [target]
    assert [c for c in world.queue.sent if c.move.image == SIDE] == []  # not patched back
    held = store.targets.get(target)
    assert held is not None and held.status is TargetStatus.HELD and held.held_digest == D2
    assert held.settled_at(D2) and not held.settled_at(D1)  # the level checks leave it alone
    assert world.reconciler.run("run-3").held == []  # recorded once
    assert [c for c in world.queue.sent if c.move.image == SIDE] == []
    # released by a person: the next run heals it
    assert store.targets.release(target, 3, reason="released", trigger="manual")
    world.reconciler.run("run-4")
    assert "run-4" in [c.reconcile_run for c in world.queue.sent if c.move.image == SIDE]


def test_unreachable_cluster_is_skipped_recorded_and_its_index_kept(world, store):
    world.clusters["west"].add(wl("db", {"db": SIDE}))
    world.clusters["east"].add(wl("web", {"web": APP}))
    world.reconciler.run("run-1")
    world.clusters.unreachable.add("west")
    world.clusters["east"].list_error = Forbidden("forbidden: list deployments.apps")
    world.clusters["east"].items.clear()
    report = world.reconciler.run("run-2")
    assert report.clusters["west"] == {
        "ok": False,
        "workloads": 0,
        "error": "Unreachable: cluster west: connection refused",
    }
    assert report.clusters["east"]["ok"] is False and "Forbidden" in report.clusters["east"]["error"]
    assert report.clusters["lab"]["ok"] is True
    assert report.removed == []  # nothing is dropped on a cluster that could not be listed
    assert {e.target_id for e in store.index.entries()} == {
        "west/shop/Deployment/db/db",
        "east/shop/Deployment/web/web",
    }
    recorded = store.clusters.get("west")
    assert recorded is not None and not recorded.ok and "connection refused" in (recorded.error or "")
    assert store.clusters.get("lab").ok
    # the skipped clusters' targets are still followed (resolved and level-checked)
    assert sorted(set(world.registry.calls)) == sorted([APP, SIDE])


def test_argo_rollouts_tagpin_may_not_list_are_noted_kept_and_the_other_kinds_go_on(world, store):
    """RBAC applied before tagpin knew Argo Rollouts (403), or a cluster without them (404): a
    note, not a skipped cluster; the Rollouts already followed stay in the index."""
    east, west = world.clusters["east"], world.clusters["west"]
    east.add(wl("web", {"web": APP}), wl("canary", {"app": SIDE}, kind=Kind.ROLLOUT))
    world.reconciler.run("run-1")
    assert "east/shop/Rollout/canary/app" in {e.target_id for e in store.index.entries()}
    east.list_errors[Kind.ROLLOUT] = Forbidden("forbidden: list rollouts.argoproj.io in all namespaces")
    west.list_errors[Kind.ROLLOUT] = NotFound("workload not found")
    east.add(wl("api", {"api": APP}))
    report = world.reconciler.run("run-2")
    assert report.clusters["east"] == {"ok": True, "workloads": 2} and report.clusters["west"]["ok"]
    assert report.added == ["east/shop/Deployment/api/api"] and report.removed == []
    assert "east/shop/Rollout/canary/app" in {e.target_id for e in store.index.entries()}
    assert "east: Rollout not listed: forbidden: list rollouts.argoproj.io in all namespaces" in report.notes
    assert "west: Rollout is not served" in report.notes
    east.list_errors[Kind.DEPLOYMENT] = Forbidden("forbidden: list deployments.apps")
    report = world.reconciler.run("run-3")
    assert report.clusters["east"]["ok"] is False  # a built-in kind: the cluster is skipped, as ever


def test_deleted_unlabelled_or_paused_targets_are_removed_and_recorded(world, store):
    east = world.clusters["east"]
    east.add(wl("web", {"web": APP}), wl("api", {"api": APP}), wl("db", {"db": SIDE}))
    world.reconciler.run("run-1")
    # deleted (or unlabelled: the label-selected LIST no longer returns it)
    del east.items[("shop", Kind.DEPLOYMENT, "web")]
    east.add(wl("api", {"api": APP}, annotations={"tagpin.dev/paused": "true"}))
    east.add(wl("db", {"db": APP}))  # the same container now follows another tag
    report = world.reconciler.run("run-2")
    assert sorted(report.removed) == ["east/shop/Deployment/api/api", "east/shop/Deployment/web/web"]
    index = {(e.image, e.target_id) for e in store.index.entries()}
    assert index == {(APP, "east/shop/Deployment/db/db")}
    history = store.history.of_target("east/shop/Deployment/web/web")
    assert history[0].status == "removed" and "deleted" in history[0].detail


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_run_that_dies_removing_targets_removes_each_once_run_again(dynamodb, state_table, store, when):
    """Two targets stop being followed; the run dies at the first one's removal (before DynamoDB
    has it, or after). The next run: both are removed, each with one 'removed' item, and the index
    is without them. (Before, the index was written first: the next run no longer saw the stale
    entries, and the targets the dying run had not reached were never removed.)"""
    web, api = "east/shop/Deployment/web/web", "east/shop/Deployment/api/api"
    dying = Dying(dynamodb, lambda item: item.get("status", {}).get("S") == "removed", when)
    first = World(dynamodb_state(dying, state_table))
    east = first.clusters["east"]
    east.add(wl("web", {"web": APP}), wl("api", {"api": APP}))
    first.reconciler.run("run-1")
    for target in (web, api):  # tagpin moved them: each has a state
        assert store.targets.claim(target, APP, D1, 1, Trigger.RECONCILE, 1)
    del east.items[("shop", Kind.DEPLOYMENT, "web")]
    del east.items[("shop", Kind.DEPLOYMENT, "api")]
    with pytest.raises(Crash):
        first.reconciler.run("run-2")
    assert dying.crashed

    again = World(store)
    again.clusters.clusters["east"] = east  # the same cluster, read by the next run
    again.reconciler.run("run-3")
    for target in (web, api):
        st_ = store.targets.get(target)
        assert st_ is not None and st_.status is TargetStatus.REMOVED, (target, st_)
        removed = [e for e in store.history.of_target(target) if e.status == "removed"]
        assert len(removed) == 1, (target, removed)
    assert store.index.entries() == []
    again.reconciler.run("run-4")  # and another run: nothing more
    assert all(len([e for e in store.history.of_target(t) if e.status == "removed"]) == 1 for t in (web, api))


def test_a_cluster_dropped_from_the_configuration_loses_its_entries(world, store):
    store.index.update(
        [IndexEntry(APP, "gone/shop/Deployment/web/web", "gone", "shop", "Deployment", "web", "web")], []
    )
    report = world.reconciler.run("run-1")
    assert report.removed == ["gone/shop/Deployment/web/web"]
    assert store.index.entries() == []


def test_registry_failure_enqueues_nothing_for_that_tag_only(world):
    world.registry.answers[SIDE] = ConnectionError("registry down")
    world.clusters["east"].add(wl("web", {"web": f"{APP}@{D0}"}), wl("db", {"db": f"{SIDE}@{D0}"}))
    report = world.reconciler.run("run-1")
    assert [c.move.image for c in world.heals()] == [APP]
    assert any(e.startswith(SIDE) for e in report.errors)


# -- Followed: configuration + index ----------------------------------------------------------------


def test_followed_merges_configuration_and_index(store):
    entries = [
        IndexEntry(APP, "east/shop/Deployment/web/web", "east", "shop", "Deployment", "web", "web"),
        IndexEntry(APP, "lab/legacy/Deployment/old/app", "lab", "legacy", "Deployment", "old", "app"),  # dup
        IndexEntry(SIDE, "mars/shop/Deployment/x/x", "mars", "shop", "Deployment", "x", "x"),  # unknown
        IndexEntry(SIDE, "west/shop/CronJob/job/c", "west", "shop", "CronJob", "job", "c"),
    ]
    store.index.update(entries, [])
    followed = Followed(RECONCILE_CONFIG, store)
    assert [t.id for t in followed[APP].targets] == [
        "lab/legacy/Deployment/old/app",
        "east/shop/Deployment/web/web",
    ]
    assert [t.id for t in followed.get(SIDE).targets] == ["west/shop/CronJob/job/c"]
    assert followed.get("docker.io/library/redis:7") is None
    assert set(Followed(RECONCILE_CONFIG, store)) == {APP, SIDE} and len(followed) == 2
    assert followed[SIDE].targets[0].kind is Kind.CRONJOB
