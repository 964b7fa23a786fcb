"""tagpin never puts its own rollouts on hold: the whole local stack (registry push notifications,
webhook, consumer, the reconciler scheduled every second) with the reconciler's listing made slow,
so that tagpin's patches land between its LIST of Deployments and its read of the targets' states.

The Rollouts LIST (the last kind the reconciler lists) is delayed 2.5 s: every Deployment listing
is then 2.5 s old when the states are read. Ten pushes, each patched by tagpin while such a listing
is in flight: no target is held, nothing is announced held. Then a person's `kubectl set image`
under the same slow listing is still held.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tagpin.ports.state import TargetStatus
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.constants import FOLLOW
from tests.support.stack import state_of, wait_for

pytestmark = pytest.mark.integration

TARGET = "local/default/Deployment/api/api"  # followed by its label: discovered by the LIST
PUSHES = 10
LIST_DELAY_S = 2.5


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=True, poll_interval=None, consume=True, reconcile_interval=1.0)
    with LocalStack(options) as stack:
        assert stack.registry is not None
        image = f"{stack.registry.host}/demo/api:stable"
        stack.kube.create(deployment("api", "default", image, container="api", labels=dict(FOLLOW)))
        yield stack


def image(st: LocalStack) -> str:
    obj = st.kube.get("Deployment", "default", "api")
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def test_tagpins_own_patches_are_never_held_and_a_persons_change_still_is(
    st: LocalStack, tmp_path: Path
) -> None:
    assert st.registry is not None
    lock = threading.Lock()
    listings: list[float] = []  # when each Deployment LIST was answered
    patches: list[float] = []  # when each patch of the Deployment arrived

    def at(times: list[float]) -> None:
        with lock:
            times.append(time.monotonic())

    inject = st.kube.inject
    inject("GET", r"^/apis/apps/v1/deployments$", status=None, times=None, action=lambda: at(listings))
    inject("PATCH", r"/deployments/api$", status=None, times=None, action=lambda: at(patches))
    inject("GET", r"/rollouts$", status=None, times=None, delay=LIST_DELAY_S)
    wait_for("the labelled Deployment discovered", lambda: len(listings) >= 2)
    digests = []
    for _ in range(PUSHES):
        digest = push_image(st.registry.url, "demo/api", "stable")
        wait_for(f"the patch to {digest[:19]}", lambda d=digest: image(st).endswith("@" + d), 60)
        digests.append(digest)
        time.sleep(2.0)  # pushes every ~2 s, as people push
    with lock:  # the race was run: patches landed while a listing taken before them was in flight
        raced = sum(any(0 < p - seen < LIST_DELAY_S for seen in listings) for p in patches)
    assert raced >= PUSHES // 2, f"only {raced} of {len(patches)} patches raced a listing"
    runs = len(listings)
    wait_for("two more reconciles", lambda: len(listings) >= runs + 2, 30)

    state = state_of(st).targets.get(TARGET)
    assert state is not None and state.status is not TargetStatus.HELD, state
    assert state.digest == digests[-1]
    history = [h.status for h in state_of(st).history.of_target(TARGET, limit=200)]
    assert "held" not in history
    assert [n for n in st.notifications() if n["event"] == "held"] == []

    # a person's change, under the same slow listing: held, not patched back
    previous = f"{image(st).split('@')[0]}@{digests[-2]}"
    config = st.kube.write_kubeconfig(tmp_path / "kubeconfig", context="local", identity=st.kube.admin)
    kubectl = [require_binary("kubectl"), "--kubeconfig", str(config), "--cache-dir", str(tmp_path / "c")]
    subprocess.run(
        [*kubectl, "set", "image", "deployment/api", f"api={previous}"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    wait_for(
        "the person's change held",
        lambda: (s := state_of(st).targets.get(TARGET)) is not None and s.status is TargetStatus.HELD,
        30,
    )
    time.sleep(2 * LIST_DELAY_S)
    assert image(st) == previous  # not patched back
    assert [(n["event"], n["targets"]) for n in st.notifications()] == [("held", [TARGET])]
