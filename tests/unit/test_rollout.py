"""Rollout: the pinned image and patch (pure), and the Applier with a fake cluster and moto state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tagpin import wiring
from tagpin.domain.annotations import ANNOTATION_APPLIED_AT, ANNOTATION_DIGESTS, ANNOTATION_TRIGGER
from tagpin.domain.config import Kind, parse_config
from tagpin.domain.kinds import ImageChange
from tagpin.domain.messages import Change, TargetChange
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome, ApplyResult
from tagpin.ports.state import State, TargetStatus
from tagpin.ports.workloads import Forbidden, Unreachable, Workload
from tagpin.usecases.apply import Applier, ChangeFailed
from tagpin.usecases.patch import CONFLICT_RETRIES, pinned_image

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters
from tests.support.constants import D0, D1, D2, D3, NGINX, WEB, WEB_TARGET

NIGHTLY_TARGET = "dev/jobs/CronJob/nightly/init-nginx"
FRONT_TARGET = "prod/default/Deployment/front/nginx"

ROLLOUT_CONFIG = parse_config(
    """
clusters:
  dev: {kubeconfig: {file: /dev/null}}
  prod: {eks: {name: prod, region: eu-west-1}}
images:
  - image: 127.0.0.1:5000/demo/web:stable
    targets:
      - {cluster: dev, namespace: demo, name: web, container: app}
  - image: nginx:1.27
    targets:
      - {cluster: dev, namespace: jobs, kind: CronJob, name: nightly, container: init-nginx}
      - {cluster: prod, name: front, container: nginx}
"""
)


# -- pinned_image ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "image", "expected"),
    [
        pytest.param("nginx:1.27", NGINX, f"nginx:1.27@{D1}", id="familiar-tag"),
        pytest.param(f"nginx:1.27@{D0}", NGINX, f"nginx:1.27@{D1}", id="familiar-pinned"),
        pytest.param("nginx", NGINX, f"nginx:1.27@{D1}", id="familiar-bare"),
        pytest.param("nginx:1.26", NGINX, f"nginx:1.27@{D1}", id="another-tag-of-the-repository"),
        pytest.param("docker.io/library/nginx", NGINX, f"docker.io/library/nginx:1.27@{D1}", id="full-bare"),
        pytest.param(
            f"docker.io/library/nginx:1.27@{D0}",
            NGINX,
            f"docker.io/library/nginx:1.27@{D1}",
            id="full-pinned",
        ),
        pytest.param("library/nginx:1.27", NGINX, f"library/nginx:1.27@{D1}", id="library-prefix"),
        pytest.param(
            "index.docker.io/library/nginx:1.27",
            NGINX,
            f"index.docker.io/library/nginx:1.27@{D1}",
            id="legacy-host",
        ),
        pytest.param(
            f"127.0.0.1:5000/demo/web:stable@{D0}",
            WEB,
            f"127.0.0.1:5000/demo/web:stable@{D1}",
            id="port-pinned",
        ),
        pytest.param("127.0.0.1:5000/demo/web", WEB, f"127.0.0.1:5000/demo/web:stable@{D1}", id="port-bare"),
        pytest.param(
            f"127.0.0.1:5000/demo/web@{D0}", WEB, f"127.0.0.1:5000/demo/web:stable@{D1}", id="port-digest"
        ),
        pytest.param("busybox:1.36", NGINX, f"nginx:1.27@{D1}", id="another-repository"),
        pytest.param(
            "127.0.0.1:5000/demo/api:stable", WEB, f"127.0.0.1:5000/demo/web:stable@{D1}", id="other-repo"
        ),
        pytest.param(
            "127.0.0.1:5001/demo/web:stable", WEB, f"127.0.0.1:5000/demo/web:stable@{D1}", id="other-port"
        ),
        pytest.param("", NGINX, f"nginx:1.27@{D1}", id="empty"),
        pytest.param("NOT a reference", NGINX, f"nginx:1.27@{D1}", id="invalid"),
        pytest.param(
            "ghcr.io/acme/api:1",
            "ghcr.io/acme/api:stable",
            f"ghcr.io/acme/api:stable@{D1}",
            id="ghcr-tag-change",
        ),
        pytest.param(
            "acme/tool:2", "docker.io/acme/tool:stable", f"acme/tool:stable@{D1}", id="docker-hub-org"
        ),
    ],
)
def test_pinned_image(current: str, image: str, expected: str) -> None:
    assert pinned_image(current, image, D1) == expected


# -- the patch body (a kind's profile) ------------------------------------------------------------


def test_image_patch_for_a_deployment() -> None:
    body = Kind.DEPLOYMENT.profile.patch_body(
        ImageChange("4711", "app", False, f"web:stable@{D1}", {"a": "b"})
    )
    assert body == {
        "metadata": {"resourceVersion": "4711"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"a": "b"}},
                "spec": {"containers": [{"name": "app", "image": f"web:stable@{D1}"}]},
            }
        },
    }


def test_image_patch_for_a_cronjob_init_container() -> None:
    body = Kind.CRONJOB.profile.patch_body(ImageChange("12", "init-nginx", True, f"nginx:1.27@{D1}", {}))
    assert body["metadata"] == {"resourceVersion": "12"}
    template = body["spec"]["jobTemplate"]["spec"]["template"]
    assert template["spec"] == {"initContainers": [{"name": "init-nginx", "image": f"nginx:1.27@{D1}"}]}
    assert "containers" not in template["spec"]
    assert "template" not in body["spec"]


@pytest.mark.parametrize("kind", [Kind.DEPLOYMENT, Kind.STATEFULSET, Kind.DAEMONSET])
def test_template_path_of_pod_controllers(kind: Kind) -> None:
    assert kind.profile.template == ("spec", "template")
    assert "template" in kind.profile.patch_body(ImageChange("1", "c", False, "x", {}))["spec"]


def test_template_path_of_a_cronjob() -> None:
    assert Kind.CRONJOB.profile.template == ("spec", "jobTemplate", "spec", "template")


# -- Applier ----------------------------------------------------------------------------------------


@pytest.fixture
def clusters() -> FakeClusters:
    """dev: Deployment demo/web (WEB, pinned to D0) and CronJob jobs/nightly (nginx in an init
    container); prod: Deployment default/front (nginx)."""
    return FakeClusters(
        dev=FakeCluster(
            [
                Workload(
                    "100",
                    {"app": f"127.0.0.1:5000/demo/web:stable@{D0}", "sidecar": "envoy:1.30"},
                    namespace="demo",
                    name="web",
                ),
                Workload(
                    "7",
                    {"main": "busybox:1.36"},
                    init_containers={"init-nginx": "nginx:1.26"},
                    template_annotations={ANNOTATION_DIGESTS: json.dumps({"main": D0})},
                    kind=Kind.CRONJOB,
                    namespace="jobs",
                    name="nightly",
                ),
            ]
        ),
        prod=FakeCluster([Workload("1", {"nginx": "nginx"}, namespace="default", name="front")]),
    )


def make_applier(store: State, clusters: FakeClusters, guard: Any = None) -> Applier:
    return Applier(
        followed=lambda: ROLLOUT_CONFIG.followed,
        state=store,
        workloads=clusters,
        clock=FakeClock(1_800_000_000_000, step=1_000),
        guard=guard,
    )


@pytest.fixture
def applier(store: State, clusters: FakeClusters) -> Applier:
    return make_applier(store, clusters)


def change(
    image: str = WEB,
    digest: str = D1,
    observed_at: int = 1_000,
    reconcile_run: str | None = None,
    **move: Any,
) -> Change:
    """A change of ``image`` to ``digest``; ``move``: the move's other fields (a poll's by default)."""
    move.setdefault("trigger", "poll")
    return Change(
        move=Move(image=image, digest=digest, observed_at=observed_at, **move), reconcile_run=reconcile_run
    )


def test_patched_once(applier: Applier, clusters: FakeClusters, store: State) -> None:
    outcomes = applier.apply(change(correlation_id="corr-7"))
    assert outcomes == [
        ApplyResult(
            outcome=ApplyOutcome.PATCHED,
            target=WEB_TARGET,
            previous_image=f"127.0.0.1:5000/demo/web:stable@{D0}",
        )
    ]
    ((namespace, kind, name, body),) = clusters["dev"].patches
    assert (namespace, kind, name) == ("demo", Kind.DEPLOYMENT, "web")
    assert body["metadata"] == {"resourceVersion": "100"}
    template = body["spec"]["template"]
    assert template["spec"] == {
        "containers": [{"name": "app", "image": f"127.0.0.1:5000/demo/web:stable@{D1}"}]
    }
    annotations = template["metadata"]["annotations"]
    assert json.loads(annotations[ANNOTATION_DIGESTS]) == {"app": D1}
    assert annotations[ANNOTATION_TRIGGER] == "poll"
    assert (
        annotations[ANNOTATION_APPLIED_AT].startswith("2027-01-15T")
        and annotations[ANNOTATION_APPLIED_AT][-1] == "Z"
    )
    assert clusters["dev"].image("demo", Kind.DEPLOYMENT, "web", "sidecar") == "envoy:1.30"

    target = store.targets.get(WEB_TARGET)
    assert target is not None
    assert (target.digest, target.status, target.observed_at, target.detail) == (
        D1,
        TargetStatus.APPLIED,
        1_000,
        "patched",
    )
    assert target.previous_image == f"127.0.0.1:5000/demo/web:stable@{D0}"
    (entry,) = store.history.of_target(WEB_TARGET)
    assert (entry.status, entry.digest, entry.correlation_id) == ("applied", D1, "corr-7")

    # The same change again (no guard): the workload already runs it; nothing is patched.
    assert applier.apply(change())[0].outcome == "already-current"
    assert len(clusters["dev"].patches) == 1


def test_every_target_of_the_image(applier: Applier, clusters: FakeClusters, store: State) -> None:
    outcomes = applier.apply(change(NGINX, D2))
    assert [(o.target, o.outcome) for o in outcomes] == [
        (NIGHTLY_TARGET, "patched"),
        (FRONT_TARGET, "patched"),
    ]
    ((_, kind, _, body),) = clusters["dev"].patches
    assert kind is Kind.CRONJOB
    template = body["spec"]["jobTemplate"]["spec"]["template"]
    assert template["spec"] == {"initContainers": [{"name": "init-nginx", "image": f"nginx:1.27@{D2}"}]}
    # Digests of the other containers recorded in the annotation are kept.
    assert json.loads(template["metadata"]["annotations"][ANNOTATION_DIGESTS]) == {
        "main": D0,
        "init-nginx": D2,
    }
    assert clusters["prod"].image("default", Kind.DEPLOYMENT, "front", "nginx") == f"nginx:1.27@{D2}"
    assert outcomes[1].previous_image == "nginx"
    assert store.targets.get(NIGHTLY_TARGET).status is TargetStatus.APPLIED  # type: ignore[union-attr]
    assert store.targets.get(FRONT_TARGET).status is TargetStatus.APPLIED  # type: ignore[union-attr]


def test_unreadable_digest_annotation_is_replaced(applier: Applier, clusters: FakeClusters) -> None:
    clusters["dev"].items[("demo", Kind.DEPLOYMENT, "web")].template_annotations[ANNOTATION_DIGESTS] = (
        "{not json"
    )
    applier.apply(change())
    body = clusters["dev"].patches[0][3]
    assert json.loads(body["spec"]["template"]["metadata"]["annotations"][ANNOTATION_DIGESTS]) == {"app": D1}


def test_conflict_is_retried(applier: Applier, clusters: FakeClusters, store: State) -> None:
    clusters["dev"].conflicts = 1
    outcomes = applier.apply(change())
    assert outcomes[0].outcome == "patched"
    assert len(clusters["dev"].gets) == 2  # re-read after the conflict
    assert [p[3]["metadata"]["resourceVersion"] for p in clusters["dev"].patches] == ["100", "101"]
    assert clusters["dev"].image("demo", Kind.DEPLOYMENT, "web", "app").endswith(D1)
    assert store.targets.get(WEB_TARGET).status is TargetStatus.APPLIED  # type: ignore[union-attr]


def test_conflicts_are_retried_after_a_growing_pause(
    applier: Applier, clusters: FakeClusters, store: State, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workload mid-rollout: its controller writes its status between our read and our patch,
    again and again. Five conflicts in a row (all the attempts there were, back to back, before)
    cost pauses that double, and the change lands."""
    paused: list[float] = []
    monkeypatch.setattr("tagpin.usecases.patch.time.sleep", paused.append)
    clusters["dev"].conflicts = 5
    outcomes = applier.apply(change())
    assert outcomes[0].outcome == "patched" and len(clusters["dev"].patches) == 6
    assert len(paused) == 5  # each a doubling of the one before, with jitter
    assert all(0.5 * 0.05 * 2**i <= s <= 1.5 * 0.05 * 2**i for i, s in enumerate(paused)), paused
    assert store.targets.get(WEB_TARGET).status is TargetStatus.APPLIED  # type: ignore[union-attr]


def test_endless_conflicts_fail_the_change(
    applier: Applier, clusters: FakeClusters, store: State, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tagpin.usecases.patch.time.sleep", lambda _s: None)
    clusters["dev"].conflicts = CONFLICT_RETRIES + 10
    with pytest.raises(ChangeFailed, match="still conflicting"):
        applier.apply(change())
    assert len(clusters["dev"].patches) == CONFLICT_RETRIES
    assert store.targets.get(WEB_TARGET).status is TargetStatus.FAILED  # type: ignore[union-attr]


def test_not_found_is_gone_without_an_exception(
    applier: Applier, clusters: FakeClusters, store: State
) -> None:
    del clusters["dev"].items[("demo", Kind.DEPLOYMENT, "web")]
    outcomes = applier.apply(change())
    assert outcomes == [
        ApplyResult(
            outcome=ApplyOutcome.GONE, target=WEB_TARGET, error="NotFound: Deployment demo/web not found"
        )
    ]
    assert clusters["dev"].patches == []
    target = store.targets.get(WEB_TARGET)
    assert target is not None
    assert (target.status, target.detail) == (TargetStatus.GONE, "NotFound: Deployment demo/web not found")
    assert [e.status for e in store.history.of_target(WEB_TARGET)] == ["gone"]


def test_forbidden_is_failed_without_an_exception(
    applier: Applier, clusters: FakeClusters, store: State
) -> None:
    clusters["dev"].patch_error = Forbidden("deployments.apps is forbidden")
    outcomes = applier.apply(change())
    assert outcomes == [
        ApplyResult(
            outcome=ApplyOutcome.FAILED, target=WEB_TARGET, error="Forbidden: deployments.apps is forbidden"
        )
    ]
    assert store.targets.get(WEB_TARGET).status is TargetStatus.FAILED  # type: ignore[union-attr]


def test_missing_container_is_a_permanent_failure(
    applier: Applier, clusters: FakeClusters, store: State
) -> None:
    clusters["dev"].items[("demo", Kind.DEPLOYMENT, "web")].containers.pop("app")
    (outcome,) = applier.apply(change())
    assert outcome.outcome is ApplyOutcome.FAILED
    assert "has no container 'app'" in (outcome.error or "")
    assert clusters["dev"].patches == []


@pytest.mark.parametrize("where", ["connect", "get"])
def test_unreachable_raises_change_failed(
    applier: Applier, clusters: FakeClusters, store: State, where: str
) -> None:
    if where == "connect":
        clusters.unreachable.add("dev")
    else:
        clusters["dev"].get_error = Unreachable("503 from the API server")
    with pytest.raises(ChangeFailed) as info:
        applier.apply(change())
    assert WEB_TARGET in str(info.value)
    assert clusters["dev"].patches == []
    target = store.targets.get(WEB_TARGET)
    assert target is not None
    assert target.status is TargetStatus.FAILED
    assert (target.detail or "").startswith("Unreachable: ")


def test_one_unreachable_cluster_does_not_stop_the_others(
    applier: Applier, clusters: FakeClusters, store
) -> None:
    clusters.unreachable.add("dev")
    with pytest.raises(ChangeFailed) as info:
        applier.apply(change(NGINX, D2))
    assert NIGHTLY_TARGET in str(info.value)
    assert FRONT_TARGET not in str(info.value)
    assert clusters["prod"].image("default", Kind.DEPLOYMENT, "front", "nginx") == f"nginx:1.27@{D2}"
    assert store.targets.get(FRONT_TARGET).status is TargetStatus.APPLIED  # type: ignore[union-attr]
    assert store.targets.get(NIGHTLY_TARGET).status is TargetStatus.FAILED  # type: ignore[union-attr]


def test_an_image_no_longer_followed_is_skipped(applier: Applier, clusters: FakeClusters) -> None:
    assert applier.apply(change("docker.io/library/redis:7")) == [
        ApplyResult(outcome=ApplyOutcome.NOT_FOLLOWED, image="docker.io/library/redis:7")
    ]
    assert clusters["dev"].gets == [] and clusters["prod"].gets == []


def test_a_change_superseded_by_a_newer_tag_state_patches_nothing(
    applier: Applier, clusters: FakeClusters, store: State
) -> None:
    store.tags.record(WEB, D2, 2_000, "webhook")
    outcomes = applier.apply(change(WEB, D1, 1_000))
    assert outcomes == [ApplyResult(outcome=ApplyOutcome.SUPERSEDED, image=WEB, detail=f"current: {D2}")]
    assert clusters["dev"].gets == [] and clusters["dev"].patches == []
    assert store.targets.get(WEB_TARGET) is None


def test_a_change_matching_the_tag_state_is_applied(applier: Applier, clusters: FakeClusters, store) -> None:
    store.tags.record(WEB, D1, 1_000, "poll")
    store.tags.record(WEB, D1, 5_000, "poll")  # checked again later: observed_at moves, digest does not
    assert applier.apply(change(WEB, D1, 1_000))[0].outcome == "patched"


def test_an_older_change_after_a_newer_one_is_refused_by_the_claim(
    applier: Applier, clusters: FakeClusters, store: State
) -> None:
    assert applier.apply(change(WEB, D3, 2_000))[0].outcome == "patched"
    outcomes = applier.apply(change(WEB, D2, 1_000))  # delivered late; no tag state says otherwise
    # the promotion of the newer digest holds the tag (the target's claim would refuse it too)
    assert [o.outcome for o in outcomes] == [ApplyOutcome.SUPERSEDED]
    assert len(clusters["dev"].patches) == 1
    assert (
        clusters["dev"].image("demo", Kind.DEPLOYMENT, "web", "app") == f"127.0.0.1:5000/demo/web:stable@{D3}"
    )
    target = store.targets.get(WEB_TARGET)
    assert target is not None
    assert (target.digest, target.status, target.observed_at) == (D3, TargetStatus.APPLIED, 2_000)


# -- the idempotency guard (powertools on a moto table) ---------------------------------------------


class FakeLambdaContext:
    function_name = "tagpin-consumer"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@pytest.fixture
def guard(aws, idempotency_table: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The consumer's own guard, built by wiring from the environment."""
    monkeypatch.setenv("TAGPIN_IDEMPOTENCY_TABLE", idempotency_table)
    wiring.reset()
    wiring.idempotency_config().register_lambda_context(FakeLambdaContext())  # as the consumer does
    yield wiring.idempotency_guard()
    wiring.reset()


def test_guard_applies_the_same_change_once(
    store: State, clusters: FakeClusters, guard: Any, dynamodb, idempotency_table: str
) -> None:
    clusters[
        "dev"
    ].remember = False  # the workload never shows the new image: only the guard stops a re-patch
    applier = make_applier(store, clusters, guard)
    first = applier.apply(change())
    second = applier.apply(change(trigger="webhook", correlation_id="replayed"))
    assert first == second
    assert first[0].outcome == "patched"
    assert len(clusters["dev"].patches) == 1
    assert len(clusters["dev"].gets) == 1
    assert len(store.history.of_target(WEB_TARGET)) == 1
    records = dynamodb.scan(TableName=idempotency_table)["Items"]
    assert len(records) == 1
    assert records[0]["status"]["S"] == "COMPLETED"

    # Another digest for the same target is another key.
    applier.apply(change(digest=D2, observed_at=2_000))
    assert len(clusters["dev"].patches) == 2
    assert len(dynamodb.scan(TableName=idempotency_table)["Items"]) == 2


def flat(change: TargetChange) -> dict[str, Any]:
    """A target change in the shape deployed stacks had, before it carried the move: its fields
    and its move's side by side."""
    return {**change.model_dump(exclude={"move"}), **change.move.model_dump()}


def test_a_record_the_deployed_guard_stored_answers_the_typed_key(
    store: State, clusters: FakeClusters, guard: Any, dynamodb, idempotency_table: str
) -> None:
    """Deployed stacks keyed each record on the JMESPath ``[target_id, digest, changed_at,
    reconcile_run]`` of the parameter named ``target_change``; the guard now hashes the change's
    typed key (``TargetChange.key``) to the same record, so a change applied before an update is
    not rolled again after it."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.serialization.pydantic import PydanticSerializer

    clusters["dev"].remember = False  # only a guard stops a re-patch
    config = IdempotencyConfig(
        event_key_jmespath="[target_id, digest, changed_at, reconcile_run]", expires_after_seconds=24 * 3600
    )
    config.register_lambda_context(FakeLambdaContext())
    persistence = DynamoDBPersistenceLayer(table_name=idempotency_table, boto3_client=dynamodb)

    def deployed_guard(fn: Any) -> Any:  # the guard as deployed stacks built it
        def apply_target(target_change: dict[str, Any]) -> ApplyResult:
            return fn(TargetChange.model_validate(target_change))

        wrapped = idempotent_function(
            apply_target,
            data_keyword_argument="target_change",
            persistence_store=persistence,
            config=config,
            output_serializer=PydanticSerializer(model=ApplyResult),
            key_prefix="tagpin.apply_target",
        )
        # what it read the JMESPath from: the target change as deployed stacks had it, flat
        return lambda change: wrapped(target_change=flat(change))

    healing = change(trigger="reconcile", reconcile_run="run-7", changed_at=900)
    assert make_applier(store, clusters, deployed_guard).apply(healing)[0].outcome == "patched"
    assert len(dynamodb.scan(TableName=idempotency_table)["Items"]) == 1
    again = make_applier(store, clusters, guard).apply(healing)  # after the update: the new guard
    assert again[0].outcome == "patched" and len(clusters["dev"].patches) == 1  # answered, not rolled
    assert len(dynamodb.scan(TableName=idempotency_table)["Items"]) == 1


# One target's change as deployed stacks built it (flat; ``TargetChange.model_dump_json`` before it
# carried the move), and the id of the record their guard stored for it (computed by that code).
DEPLOYED_TARGET_CHANGE = (
    '{"target_id":"dev/demo/Deployment/web/app","cluster":"dev","namespace":"demo","kind":"Deployment",'
    '"name":"web","container":"app","image":"127.0.0.1:5000/demo/web:stable","digest":"' + D1 + '",'
    '"observed_at":1763702400000,"trigger":"reconcile","correlation_id":"run-7","reconcile_run":"run-7",'
    '"changed_at":900,"tag":null}'
)
DEPLOYED_RECORD_ID = "tagpin.apply_target#2c808154ee79600ce1775945f7768c79"


def test_the_guard_keys_a_change_read_in_the_old_shape_on_the_record_id_deployed_stacks_stored(
    guard: Any, dynamodb, idempotency_table: str
) -> None:
    """The same move, read from the flat shape or carried in the new one, hashes to the record id
    the deployed guard wrote (a literal, not recomputed here): byte for byte."""
    old = TargetChange.model_validate_json(DEPLOYED_TARGET_CHANGE)
    new = TargetChange.model_validate_json(old.model_dump_json())
    assert "move" in json.loads(old.model_dump_json()) and new == old
    ran: list[TargetChange] = []

    def apply_target(tc: TargetChange) -> ApplyResult:
        ran.append(tc)
        return ApplyResult(outcome=ApplyOutcome.PATCHED, target=tc.target_id)

    applied = guard(apply_target)
    assert applied(new).outcome is ApplyOutcome.PATCHED
    (record,) = dynamodb.scan(TableName=idempotency_table)["Items"]
    assert record["id"]["S"] == DEPLOYED_RECORD_ID
    assert applied(old).outcome is ApplyOutcome.PATCHED and ran == [new]  # answered from the record


def test_without_the_guard_the_same_change_patches_twice(store: State, clusters: FakeClusters) -> None:
    """The control for the test above: with a forgetful workload, only the guard prevents a re-patch."""
    clusters["dev"].remember = False
    applier = make_applier(store, clusters)
    applier.apply(change())
    applier.apply(change())
    assert len(clusters["dev"].patches) == 2


def test_guard_does_not_store_permanent_failures(
    store: State, clusters: FakeClusters, guard: Any, dynamodb, idempotency_table: str
) -> None:
    workload = clusters["dev"].items.pop(("demo", Kind.DEPLOYMENT, "web"))
    applier = make_applier(store, clusters, guard)
    assert applier.apply(change())[0].outcome == "gone"
    assert dynamodb.scan(TableName=idempotency_table)["Items"] == []

    clusters["dev"].items[("demo", Kind.DEPLOYMENT, "web")] = workload  # created later
    assert applier.apply(change())[0].outcome == "patched"
    assert len(clusters["dev"].patches) == 1


def test_guard_does_not_store_transient_failures(store: State, clusters: FakeClusters, guard: Any) -> None:
    applier = make_applier(store, clusters, guard)
    clusters.unreachable.add("dev")
    with pytest.raises(ChangeFailed):
        applier.apply(change())
    clusters.unreachable.clear()  # the SQS retry
    assert applier.apply(change())[0].outcome == "patched"
    assert store.targets.get(WEB_TARGET).status is TargetStatus.APPLIED  # type: ignore[union-attr]


def test_a_paused_workload_is_recorded_not_patched_nor_cached(
    store: State, clusters: FakeClusters, guard: Any, dynamodb, idempotency_table: str
) -> None:
    workload = clusters["dev"].items[("demo", Kind.DEPLOYMENT, "web")]
    workload.annotations["tagpin.dev/paused"] = "true"
    applier = make_applier(store, clusters, guard)
    (outcome,) = applier.apply(change())
    assert outcome.outcome is ApplyOutcome.PAUSED and "tagpin.dev/paused" in (outcome.error or "")
    assert clusters["dev"].patches == []
    assert store.targets.get(WEB_TARGET).status is TargetStatus.PAUSED  # type: ignore[union-attr]
    assert dynamodb.scan(TableName=idempotency_table)["Items"] == []
    del workload.annotations["tagpin.dev/paused"]  # un-paused: the next change applies
    assert applier.apply(change())[0].outcome == "patched"


def test_a_reconcile_run_is_applied_again_after_a_manual_edit_and_stays_idempotent(
    store: State, clusters: FakeClusters, guard: Any
) -> None:
    applier = make_applier(store, clusters, guard)
    assert applier.apply(change())[0].outcome == "patched"
    # someone puts the old image back by hand; the same change again is answered by the guard...
    clusters["dev"].items[("demo", Kind.DEPLOYMENT, "web")].containers["app"] = WEB
    assert applier.apply(change())[0].outcome == "patched"
    assert len(clusters["dev"].patches) == 1
    # ...the reconciler's healing change (its run id joins the key) patches it again, once
    healing = change(trigger="reconcile", reconcile_run="run-9")
    assert applier.apply(healing)[0].outcome == "patched"
    assert applier.apply(healing)[0].outcome == "patched"  # an SQS redelivery: from the guard
    assert len(clusters["dev"].patches) == 2
    assert clusters["dev"].items[("demo", Kind.DEPLOYMENT, "web")].containers["app"].endswith("@" + D1)
