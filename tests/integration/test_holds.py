"""A person's decision is never fought: the real handlers on the local stack, the SQS loop running,
a Deployment in the cluster changed with `kubectl` after tagpin's patch.

- a Deployment rolled back by a person after tagpin's patch (`kubectl rollout undo`, or the
  previous image set by hand) is not patched back by the next poll or reconcile:
  the target is held (recorded, announced once) until the tag moves, and the next move applies;
- `tagpin hold` keeps a target where it is whatever the tag does, `tagpin release` ends it and
  applies the tag's digest at once;
- a workload annotated `tagpin.dev/hold: "true"` is not patched;
- a GitOps tool's server-side apply of the tag conflicts with tagpin's field manager, and once
  forced is held like any person's change.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tagpin.ports.state import TargetStatus
from tagpin_cli import commands
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import state_of
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TARGET = "local/default/Deployment/web/web"


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=False, poll_interval=None, consume=True)
    with LocalStack(options) as stack:
        assert stack.registry is not None
        stack.kube.create(
            deployment("web", "default", f"{stack.registry.host}/demo/web:stable", container="web")
        )
        yield stack


def image(st: LocalStack) -> str:
    obj = st.kube.get("Deployment", "default", "web")
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def roll(st: LocalStack) -> str:
    """Push a new digest under the tag, poll, wait for the patch."""
    assert st.registry is not None
    digest = push_image(st.registry.url, "demo/web", "stable")
    st.run_poller()
    wait_for(f"the patch to {digest[:19]}", lambda: image(st).endswith("@" + digest))
    return digest


def kubectl(st: LocalStack, tmp: Path, *args: str) -> None:
    config = st.kube.write_kubeconfig(tmp / "kubeconfig", context="local", identity=st.kube.admin)
    subprocess.run(
        [require_binary("kubectl"), "--kubeconfig", str(config), "--cache-dir", str(tmp / "cache"), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("undo", ["rollout undo", "set image"])
def test_a_change_by_a_person_is_held_until_the_tag_moves(st: LocalStack, tmp_path: Path, undo: str) -> None:
    before = roll(st)
    pinned = image(st)
    applied = roll(st)
    if undo == "rollout undo":  # back to the previous revision: kubectl reads the ReplicaSets
        kubectl(st, tmp_path, "rollout", "undo", "deployment/web")
        notes = st.kube.get("Deployment", "default", "web")["spec"]["template"]["metadata"]["annotations"]
        assert before in notes["tagpin.dev/digests"]  # the whole previous template came back
    else:  # the previous image set by hand
        kubectl(st, tmp_path, "set", "image", "deployment/web", f"web={pinned}")
    assert image(st) == pinned
    st.notifications()
    st.run_poller()  # the state says applied: the poll sees nothing to do
    st.run_reconciler()  # it sees the workload runs another digest: a person changed it
    held = state_of(st).targets.get(TARGET)
    assert held is not None and held.status is TargetStatus.HELD and held.held_digest == applied
    assert "changed outside tagpin" in (held.detail or "")
    st.run_reconciler()
    st.run_poller()
    time.sleep(1)
    assert image(st) == pinned and image(st).endswith("@" + before)  # not patched back
    announced = [(n["event"], n["targets"]) for n in st.notifications()]
    assert announced == [("held", [TARGET])]  # once
    rows = [t for r in commands.status() for t in r["targets"] if t["target"] == TARGET]
    assert rows[0]["condition"] == "held"
    plan = [r for r in commands.plan() if r["target"] == TARGET]
    assert plan[0]["action"] == "none" and plan[0]["detail"].startswith("held:")
    # the tag moves: the hold was against the old digest, the new one applies
    moved = roll(st)
    assert state_of(st).targets.get(TARGET).digest == moved  # type: ignore[union-attr]


def test_tagpin_hold_keeps_a_target_until_released(st: LocalStack) -> None:
    current = roll(st)
    assert commands.hold(TARGET)["held"] is True
    assert st.registry is not None
    newer = push_image(st.registry.url, "demo/web", "stable")
    st.run_poller()
    st.run_reconciler()
    time.sleep(1.5)
    assert image(st).endswith("@" + current)  # held: the new digest is not applied
    released = commands.release(TARGET)
    assert released["released"] is True
    wait_for("the tag's digest applied after the release", lambda: image(st).endswith("@" + newer))


def test_a_workload_annotated_hold_is_not_patched(st: LocalStack, tmp_path: Path) -> None:
    current = roll(st)
    kubectl(st, tmp_path, "annotate", "deployment/web", "tagpin.dev/hold=true")
    try:
        assert st.registry is not None
        push_image(st.registry.url, "demo/web", "stable")
        st.run_poller()
        wait_for(
            "the target recorded held",
            lambda: (s := state_of(st).targets.get(TARGET)) is not None and s.status is TargetStatus.HELD,
        )
        assert image(st).endswith("@" + current)
    finally:
        kubectl(st, tmp_path, "annotate", "deployment/web", "tagpin.dev/hold-")
    st.run_reconciler()  # the annotation is gone: healed
    wait_for("healed once the annotation is gone", lambda: not image(st).endswith("@" + current))


def test_a_gitops_apply_of_the_tag_conflicts_with_tagpin_and_once_forced_is_held(
    st: LocalStack, tmp_path: Path
) -> None:
    """What a GitOps tool sees (Argo CD and Flux apply server-side): tagpin's patch is an update by
    the field manager "tagpin", which then owns the container's image; the tool's next apply of the
    tag conflicts with it, naming tagpin, and an apply with --force-conflicts (a sync that overrides)
    takes the image back: a person's decision, held, not fought."""
    applied = roll(st)
    fields = {
        m["manager"]: m for m in st.kube.get("Deployment", "default", "web")["metadata"]["managedFields"]
    }
    owned = json.dumps(fields["tagpin"]["fieldsV1"])
    assert (
        fields["tagpin"]["operation"] == "Update"
        and 'k:{\\"name\\":\\"web\\"}' in owned
        and "f:image" in owned
    )
    assert st.registry is not None
    manifest = json.dumps(
        deployment("web", "default", f"{st.registry.host}/demo/web:stable", container="web")
    )
    config = st.kube.write_kubeconfig(tmp_path / "kubeconfig", context="local", identity=st.kube.admin)

    def apply(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [require_binary("kubectl"), "--kubeconfig", str(config), "--cache-dir", str(tmp_path / "c"),
             "apply", "--server-side", "--field-manager=gitops", *extra, "-f", "-"],
            input=manifest, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip

    refused = apply()
    assert refused.returncode != 0 and 'conflict with "tagpin"' in refused.stderr, refused.stderr
    assert '.spec.template.spec.containers[name="web"].image' in refused.stderr
    assert image(st).endswith("@" + applied)
    forced = apply("--force-conflicts")
    assert forced.returncode == 0 and "serverside-applied" in forced.stdout, forced.stderr
    assert image(st) == f"{st.registry.host}/demo/web:stable"
    # what runs now is read from the pods of the tag (their imageID): once they run
    st.kube.kube.kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    st.run_reconciler()  # a change outside tagpin: held, not patched back
    held = state_of(st).targets.get(TARGET)
    assert held is not None and held.status is TargetStatus.HELD and held.held_digest == applied
    st.run_poller()
    time.sleep(1)
    assert image(st) == f"{st.registry.host}/demo/web:stable"
