"""A hold that lands while the consumer patches, and a consumer that stops right after its PATCH,
against the real API server (tools/tagpin_local/kube) through tagpin's own client: the PATCH with
its ``tagpin.dev/replaced`` annotation lands, the consumer stops before anything else, the message
comes back and finds the target held, and the reconciler puts back the image the Deployment ran
(``tagpin.usecases.interrupted``). The state table is moto's."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.adapters.kubernetes.auth import kubeconfig_api_client
from tagpin.adapters.kubernetes.workloads import KubeWorkloads
from tagpin.domain.annotations import ANNOTATION_REPLACED
from tagpin.domain.config import FollowedImage, Kind, Target, parse_config
from tagpin.domain.messages import TargetChange, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import ApplyOutcome
from tagpin.ports.state import State, TargetStatus
from tagpin.usecases.apply import Applier
from tagpin.usecases.detect import Detector
from tagpin.usecases.reconcile import Reconciler
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.manifests import deployment

from tests.support.aws import create_table
from tests.support.constants import D1, D2, FOLLOW
from tests.support.held import HeldDuringThePatch, Stopped
from tests.support.kube import local_cluster
from tests.support.queues import ListQueue
from tests.support.registry import ScriptedRegistry

pytestmark = pytest.mark.integration

REPO = "127.0.0.1:5000/demo/held"  # never pulled from: kwok runs no containers
APP = f"{REPO}:stable"
CONFIG = parse_config("clusters:\n  lab: {kubeconfig: {file: /dev/null}}\nimages: []\n")
_SERIAL = itertools.count()


@pytest.fixture(scope="module")
def kube() -> Iterator[LocalCluster]:
    yield from local_cluster("lab")


@pytest.fixture
def store() -> Iterator[State]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(dynamodb, "state", ("pk", "sk"))
        yield dynamodb_state(dynamodb, "state")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_a_consumer_stopped_after_its_patch_under_a_new_hold_is_put_back(
    kube: LocalCluster, store: State
) -> None:
    ns = f"held-{next(_SERIAL)}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.create(deployment("web", ns, f"{APP}@{D1}", container="web", replicas=1, labels=dict(FOLLOW)))
    web = Target(cluster="lab", namespace=ns, kind=Kind.DEPLOYMENT, name="web", container="web")
    tagpin = KubeWorkloads(kubeconfig_api_client(kube.kubeconfig(), None))
    store.tags.record(APP, D1, now_ms(), Trigger.POLL)
    assert store.targets.claim(web.id, APP, D1, now_ms(), Trigger.POLL, now_ms())
    store.targets.finish(web.id, D1, TargetStatus.APPLIED, now_ms(), trigger=Trigger.POLL)
    moved = store.tags.record(APP, D2, now_ms(), Trigger.POLL)
    change = TargetChange.of(
        web, Move(image=APP, digest=D2, observed_at=moved.current.observed_at, trigger=Trigger.POLL)
    )
    followed = {APP: FollowedImage(image=APP, targets=[web])}

    def hold() -> None:
        assert store.targets.hold(web.id, "", now_ms(), reason="held by a person", trigger=Trigger.MANUAL)

    stopping = Applier(
        followed=lambda: followed,
        state=store,
        workloads=lambda _: HeldDuringThePatch(tagpin, hold),
        clock=now_ms,
    )
    with pytest.raises(Stopped):
        stopping.apply_target(change)

    def image() -> tuple[str, dict[str, str]]:
        obj = kube.get("Deployment", ns, "web")
        template = obj["spec"]["template"]
        return template["spec"]["containers"][0]["image"], template["metadata"].get("annotations", {})

    patched, notes = image()
    assert patched == f"{APP}@{D2}"
    replaced = json.loads(notes[ANNOTATION_REPLACED])["web"]
    assert replaced["image"] == f"{APP}@{D1}"

    again = Applier(followed=lambda: followed, state=store, workloads=lambda _: tagpin, clock=now_ms)
    assert again.apply_target(change).outcome is ApplyOutcome.SUPERSEDED  # held: nothing done
    assert image()[0] == f"{APP}@{D2}"

    reconciler = Reconciler(
        config=lambda: CONFIG,
        state=store,
        clusters=lambda _: tagpin,
        detector=Detector(ScriptedRegistry({}), store, ListQueue(), clock=now_ms, confirm_delays=()),
        queue=ListQueue(),
        clock=now_ms,
        resolve=False,
    )
    assert reconciler.run().put_back == [web.id]
    assert image()[0] == f"{APP}@{D1}"
    state = store.targets.get(web.id)
    # held, and its claims kept until they are too old to patch (another consumer's may still land)
    assert state is not None and state.status is TargetStatus.HELD and state.stopped_claims()
    assert reconciler.run().put_back == []  # once: the workload no longer shows the patch
    assert image()[0] == f"{APP}@{D1}"
    kube.delete("Namespace", None, ns)
