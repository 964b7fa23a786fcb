"""Version channels through the CLI as a person runs it: `tagpin status`, `plan` and `clear` in
their own processes (`python -m tagpin_cli.main --local <endpoints> --json ...`) against the local
stack (the real registry, moto, a real Kubernetes control plane, the SQS loop running), exit code, stdout
and stderr asserted.

- right after a version fails and is rolled back, the channel is at its previous version and the
  failed one is listed as bad (docs/policies.md); `tagpin clear CHANNEL VERSION` lets that same
  channel return to it, whichever spelling of the version the person types (the tags are
  `v1.0.0`, `v1.1.0`; the person clears `1.1.0`);
- when the head's tag is deleted from the registry, `plan` says the head stays and why (the
  newest allowed version is older than the head), and nothing moves down.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tagpin.ports.state import TargetStatus
from tagpin_cli import environment
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.stack import running, state_of, target_status, wait_for

pytestmark = pytest.mark.e2e

ROLLOUT: dict[str, Any] = {
    "verify_interval_seconds": 1,
    "verify_timeout_seconds": 20,
    "soak_seconds": 0,
    "waves": [{"name": "all", "clusters": ["local"]}],
}


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(
        notifications=False, poll_interval=None, consume=True, rollout=ROLLOUT, rollout_delay=0.2
    )
    with LocalStack(options) as stack:
        yield stack


@pytest.fixture(scope="module")
def endpoints(st: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli-channels") / "endpoints.json"
    environment.write_local(st.endpoints(), path)
    return path


def tagpin(endpoints: Path, *args: str) -> tuple[int, Any, str]:
    """The CLI in its own process: (exit code, stdout as JSON, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "tagpin_cli.main", "--local", str(endpoints), "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def host(st: LocalStack) -> str:
    assert st.registry is not None
    return st.registry.host


def push(st: LocalStack, repository: str, tag: str) -> str:
    assert st.registry is not None
    return push_image(st.registry.url, repository, tag)


def follow(st: LocalStack, repository: str, name: str, policy: str, channel: str) -> tuple[str, str]:
    """A Deployment apps/<name> running ``repository:0.0.1``, followed as a version channel."""
    # a broken version fails by the deployment controller's progress deadline (600 s by default)
    st.kube.create(deployment(name, "apps", f"{host(st)}/{repository}:0.0.1", progress_deadline=10))
    target = {"cluster": "local", "namespace": "apps", "name": name, "container": "app"}
    entry = {"image": f"{host(st)}/{repository}", "policy": policy, "channel": channel, "targets": [target]}
    st.options.images = [*st.options.images, entry]
    st.write_config()
    return f"{host(st)}/{repository}@{channel}", f"local/apps/Deployment/{name}/app"


def row_of(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    (row,) = [r for r in rows if r["image"] == key]
    return row


def test_after_a_rollback_the_channel_is_at_its_previous_version_and_clear_brings_it_back(
    st: LocalStack, endpoints: Path
) -> None:
    repository = "demo/cleared"
    good = push(st, repository, "v1.0.0")
    key, target = follow(st, repository, "cleared", "^1", "stable")
    st.run_poller()
    wait_for("v1.0.0 verified", lambda: target_status(st, target, good) is TargetStatus.VERIFIED)

    st.kube.break_image(f"/{repository}:v1.1.0@")
    bad = push(st, repository, "v1.1.0")
    st.run_poller()
    wait_for("v1.1.0 rolled back", lambda: target_status(st, target, bad) is TargetStatus.ROLLED_BACK)
    assert running(st, target) == f"{host(st)}/{repository}:v1.0.0@{good}"

    # Right after the rollback: the channel's version is the one its targets were rolled back to,
    # and v1.1.0 is listed as bad (docs/policies.md).
    code, rows, err = tagpin(endpoints, "status")
    assert err == "" and code == 0, err
    row = row_of(rows, key)
    assert (row["version"], row["digest"]) == ("v1.0.0", good)
    code, rows, err = tagpin(endpoints, "plan")
    assert err == "" and code == 0, err
    row = row_of(rows, key)
    assert row["version"] == "v1.0.0" and row["digest"] == good and row["action"] == "none"
    assert row["rejected"] == ["v1.1.0: bad"]

    # The cause is fixed (the image now starts); a person clears 1.1.0 (another spelling of v1.1.0):
    # the same channel returns to it.
    st.kube.repair_image(f"/{repository}:v1.1.0@")
    code, cleared, err = tagpin(endpoints, "clear", key, "1.1.0")
    assert err == "" and code == 0, err
    assert cleared == {"channel": key, "version": "1.1.0", "cleared": True}
    code, rows, err = tagpin(endpoints, "plan")
    assert err == "" and code == 4, err  # a roll is planned
    row = row_of(rows, key)
    assert row["version"] == "v1.1.0" and row["action"] == "roll" and row["rejected"] == []
    st.run_poller()
    wait_for(
        "v1.1.0 verified after the clear", lambda: target_status(st, target, bad) is TargetStatus.VERIFIED
    )
    assert running(st, target) == f"{host(st)}/{repository}:v1.1.0@{bad}"
    code, rows, err = tagpin(endpoints, "status")
    assert err == "" and code == 0, err
    row = row_of(rows, key)
    assert (row["version"], row["digest"]) == ("v1.1.0", bad)
    assert row["targets"][0]["condition"] == "current"
    # A second clear says it did nothing (exit 1), in JSON and as text.
    code, again, err = tagpin(endpoints, "clear", key, "v1.1.0")
    assert err == "" and code == 1 and again["cleared"] is False
    text = subprocess.run(
        [sys.executable, "-m", "tagpin_cli.main", "--local", str(endpoints), "clear", key, "v1.1.0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (text.returncode, text.stdout, text.stderr) == (1, "v1.1.0: was not marked bad\n", "")


def delete_manifest(st: LocalStack, repository: str, digest: str) -> None:
    """Delete a manifest (and every tag that points to it) from the registry."""
    assert st.registry is not None
    response = httpx.delete(f"{st.registry.url}/v2/{repository}/manifests/{digest}", timeout=30)
    assert response.status_code == 202, response.text


def test_plan_says_why_the_head_stays_when_its_tag_is_deleted(st: LocalStack, endpoints: Path) -> None:
    repository = "demo/deleted"
    older = push(st, repository, "2.0.0")
    newest = push(st, repository, "2.1.0")
    key, target = follow(st, repository, "deleted", "^2", "stable")
    st.run_poller()
    wait_for("2.1.0 verified", lambda: target_status(st, target, newest) is TargetStatus.VERIFIED)

    delete_manifest(st, repository, newest)
    code, rows, err = tagpin(endpoints, "plan")
    assert err == "", err
    # 4 only when a roll is planned (another test's image on the shared stack may plan one)
    assert code == (4 if any(r["action"] == "roll" for r in rows) else 0)
    row = row_of(rows, key)
    assert row["version"] == "2.1.0" and row["action"] == "none"
    assert row["detail"].startswith("the newest allowed version 2.0.0 is older than the head 2.1.0")
    assert row["digest"] == newest and row["current"] == f"{host(st)}/{repository}:2.1.0@{newest}"

    # Not moving down stays: a poll leaves the workload and the head where they are.
    st.run_poller()
    stored = state_of(st).tags.get(key)
    assert stored is not None and (stored.version, stored.digest) == ("2.1.0", newest)
    assert running(st, target) == f"{host(st)}/{repository}:2.1.0@{newest}"
    assert older != newest
