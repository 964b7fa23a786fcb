"""A put-back as a person reads it: a consumer stops right after its PATCH while a person's hold
lands, the stack's reconciler puts back the image the Deployment ran (``tagpin.usecases.interrupted``),
and ``tagpin history`` (a process of its own, ``--endpoints FILE``) shows the item that says so,
in its table and in ``--json``. The stopped consumer is the library's ``Applier`` against the stack's
state table and API server (a Lambda timeout cannot be placed between two calls of the real
function); everything after it is the stack's: its reconciler function, its moto, its cluster."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tagpin.adapters.kubernetes.auth import kubeconfig_api_client
from tagpin.adapters.kubernetes.workloads import KubeWorkloads
from tagpin.domain.config import FollowedImage, Kind, Target
from tagpin.domain.messages import TargetChange, Trigger
from tagpin.domain.moves import Move
from tagpin.ports.state import State
from tagpin.ports.targets import TargetNote
from tagpin.usecases.apply import Applier
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack

from tests.support.cli import Cli, endpoints_file
from tests.support.held import HeldDuringThePatch, Stopped
from tests.support.stack import drain, running, state_of

pytestmark = pytest.mark.e2e

WEB = Target(cluster="local", namespace="default", kind=Kind.DEPLOYMENT, name="web", container="web")


@pytest.fixture
def cli(stack: LocalStack, tmp_path: Path) -> Iterator[Cli]:
    yield Cli(stack, endpoints_file(stack, tmp_path / "endpoints.json"))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def stop_after_the_patch_under_a_hold(stack: LocalStack, store: State, app: str, digest: str) -> None:
    moved = store.tags.record(app, digest, now_ms(), Trigger.POLL)
    change = TargetChange.of(
        WEB, Move(image=app, digest=digest, observed_at=moved.current.observed_at, trigger=Trigger.POLL)
    )
    tagpin = KubeWorkloads(kubeconfig_api_client(stack.kube.kubeconfig(), None))

    def hold() -> None:
        assert store.targets.hold(WEB.id, "", now_ms(), reason="held by a person", trigger=Trigger.MANUAL)

    consumer = Applier(
        followed=lambda: {app: FollowedImage(image=app, targets=[WEB])},
        state=store,
        workloads=lambda _: HeldDuringThePatch(tagpin, hold),
        clock=now_ms,
    )
    with pytest.raises(Stopped):
        consumer.apply_target(change)


def test_history_shows_the_image_a_hold_put_back(stack: LocalStack, cli: Cli) -> None:
    assert stack.registry is not None
    app = f"{stack.registry.host}/demo/web:stable"
    first = push_image(stack.registry.url, "demo/web", "stable")
    stack.run_poller()
    drain(stack)
    assert running(stack, WEB.id) == f"{app}@{first}"

    second = push_image(stack.registry.url, "demo/web", "stable")
    store = state_of(stack)
    stop_after_the_patch_under_a_hold(stack, store, app, second)
    assert running(stack, WEB.id) == f"{app}@{second}"  # the PATCH landed under the hold

    stack.run_reconciler()
    assert running(stack, WEB.id) == f"{app}@{first}"  # put back: the person's decision wins

    events = cli.json("history", WEB.id)
    [put_back] = [e for e in events if e["status"] == TargetNote.PUT_BACK.value]
    assert put_back["target"] == WEB.id and put_back["digest"] == second
    assert put_back["trigger"] == Trigger.RECONCILE.value
    assert f"{app}@{first}" in put_back["detail"]
    assert [e["status"] for e in events].count(TargetNote.PUT_BACK.value) == 1

    table = cli("history", WEB.id)
    assert (table.code, table.err) == (0, ""), str(table)
    [row] = [line for line in table.out.splitlines() if TargetNote.PUT_BACK.value in line]
    assert WEB.id in row and "reconcile" in row and second[:19] in row and first in row

    stack.run_reconciler()  # once put back, nothing is put back again
    assert [e["status"] for e in cli.json("history", WEB.id)].count(TargetNote.PUT_BACK.value) == 1
    assert running(stack, WEB.id) == f"{app}@{first}"
