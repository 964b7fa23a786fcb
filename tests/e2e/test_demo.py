"""Both paths of the demo scenario (and its safe rollout, version channel and approval through the
console), end to end, and the ``tagpin local`` entry point."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from types import SimpleNamespace

import httpx
import pytest
from tagpin_local import demo
from tagpin_local.oci import push_image

from tests.conftest import require_binary
from tests.support import cli

pytestmark = pytest.mark.e2e


def test_demo_rolls_the_deployment_through_both_paths():
    """`tagpin demo --json` as a person runs it: the narrative on stderr, every step's results as one
    JSON document on stdout; no secret of its stack printed (its endpoints without the token)."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    ran = cli.tagpin("demo", "--json", timeout=600)
    assert ran.code == 0, ran.err[-3000:]
    result = ran.json()
    steps = [SimpleNamespace(**step) for step in result["steps"]]
    rolled_back, channel, approval = (
        SimpleNamespace(**result[k]) for k in ("rollback", "channel", "approval")
    )
    assert result["summary"]["version_channel_prod"] == "1.0.0 -> 1.3.0"
    first, webhook, poll = steps
    assert first.before.endswith("/demo/web:stable")  # the unpinned tag the team deployed
    for step, trigger in ((first, "webhook"), (webhook, "webhook"), (poll, "poll")):
        assert step.after.endswith(f"/demo/web:stable@{step.digest}")
        assert json.loads(step.annotations["tagpin.dev/digests"]) == {"web": step.digest}
        assert step.annotations["tagpin.dev/trigger"] == trigger
        assert step.annotations["tagpin.dev/applied-at"].endswith("Z")
    assert webhook.before == first.after and poll.before == webhook.after
    assert len({first.digest, webhook.digest, poll.digest}) == 3
    out = ran.err
    assert "tagpin local stack: {" in out and "console_token" not in out and "kubeconfig" not in out
    assert "before :" in out and "after  :" in out and "push -> patch" in out
    # the bad push: rolled back in stage, prod untouched, one notification per event
    assert rolled_back.stage_before.endswith("@" + rolled_back.good_digest)
    assert rolled_back.stage_after == rolled_back.stage_before
    assert rolled_back.prod_after.endswith("@" + rolled_back.good_digest)
    assert rolled_back.stage_status == "rolled_back"
    assert [(n["event"], n["wave"]) for n in rolled_back.notifications] == [
        ("applied", "stage"),
        ("rolled_back", "stage"),
    ]
    assert rolled_back.push_to_verified_s["prod"] >= rolled_back.push_to_verified_s["stage"] + demo.SOAK_S
    assert "rolled back" in out and "(untouched)" in out
    # the version channel: stage took every version, prod went from 1.0.0 straight to 1.3.0
    assert channel.stage[-3:] == ["1.1.0", "1.2.0", "1.3.0"]
    assert channel.prod == ["1.0.0", "1.3.0"]
    assert "prod ran : 1.0.0 -> 1.3.0" in out
    # approval: 1.4.0 waited before prod (prod still on 1.3.0) until approved through the console's
    # HTTP action (session cookie, CSRF token), then prod rolled to it
    assert approval.image.endswith("/demo/app@stable") and approval.version == "1.4.0"
    assert approval.waited
    assert approval.prod_while_waiting.endswith(f"/demo/app:1.3.0@{channel.versions['1.3.0']}")
    assert approval.digest not in approval.prod_while_waiting
    assert approval.approve_status == 303 and "notice=approved" in approval.approve_location
    assert len(approval.approved) == 1 and "via console" in approval.approved[0]
    assert approval.approved == ["wave prod: approved by local via console"]
    assert approval.prod_after.endswith(f"/demo/app:1.4.0@{approval.digest}")
    assert "awaiting_approval in wave prod" in out and "(not rolled)" in out
    assert "POST /console/actions/approve (session cookie, CSRF token) -> 303" in out
    # GitOps: the Argo-owned Deployment moved by tagpin's commit, which the syncer stand-in applied;
    # tagpin never patched it (no tagpin.dev/* annotation: those come with a live patch only)
    gitops = SimpleNamespace(**result["gitops"])
    assert gitops.owner == "Argo CD Application site"
    assert "managed by Argo CD Application site (label app.kubernetes.io/instance)" in out
    assert len(gitops.commit) == 40 and gitops.synced[-1] == gitops.commit
    assert gitops.commit_message == f"tagpin: site:stable@{gitops.digest[:19]}"
    assert f"newTag: stable\n    digest: {gitops.digest}\n" in gitops.kustomization_after
    assert gitops.before.endswith("/demo/site:stable@" + gitops.before.rsplit("@", 1)[1])
    assert gitops.digest not in gitops.before
    assert gitops.after.endswith(f"/demo/site:stable@{gitops.digest}")
    assert not any(key.startswith("tagpin.dev/") for key in gitops.annotations), gitops.annotations
    assert gitops.status == "verified"
    assert any(f"committed {gitops.commit} to {gitops.repository}#main" in d for d in gitops.recorded)
    assert f"tagpin committed {gitops.commit}" in out and "kubectl apply -k" in out
    summary = result["summary"]
    assert 0 < summary["gitops_push_to_commit_ms"] <= summary["gitops_push_to_running_ms"]


def endpoints_for_cli(line: str, saved: dict) -> dict:
    """What `tagpin local` prints is what it writes for `tagpin --local`, but for the secrets (in the
    file only: the console's token and the kubeconfig)."""
    printed = json.loads(line)
    assert not {"console_token", "kubeconfig"} & printed.keys()
    return printed | {key: saved[key] for key in ("console_token", "kubeconfig")}


def test_tagpin_local_serves_until_stopped_and_kubectl_sees_the_rollout(tmp_path):
    endpoints_file = tmp_path / "endpoints.json"
    require_binary("docker-registry", "/usr/bin/docker-registry")
    kubectl = require_binary("kubectl")
    tagpin = os.path.join(os.path.dirname(sys.executable), "tagpin")
    proc = subprocess.Popen(
        [tagpin, "local", "--poll-interval", "0", "--endpoints-file", str(endpoints_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        # Keep reading what the stack logs, so a full pipe never blocks it.
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        saved = json.loads(endpoints_file.read_text())
        assert saved == endpoints_for_cli(line, saved)
        endpoints = json.loads(line)
        assert {"webhook_url", "registry_url", "kubernetes_url", "aws_endpoint"} <= endpoints.keys()
        for key in ("webhook_url", "registry_url", "kubernetes_url", "aws_endpoint"):
            assert endpoints[key].split("//")[1].startswith("127.0.0.1:")
        digest = push_image(endpoints["registry_url"], "demo/web", "stable")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as kubeconfig:
            kubeconfig.write(saved["kubeconfig"])
            kubeconfig.flush()
            deadline = time.monotonic() + 30
            image = ""
            while time.monotonic() < deadline:
                image = subprocess.run(
                    [
                        kubectl,
                        "--kubeconfig",
                        kubeconfig.name,
                        "get",
                        "deploy",
                        "web",
                        "-o",
                        "jsonpath={.spec.template.spec.containers[0].image}",
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                if image.endswith("@" + digest):
                    break
                time.sleep(0.2)
            assert image.endswith("@" + digest)
        # A malformed notification is refused with a 4xx and changes nothing.
        url = endpoints["webhook_url"].replace("{source}", "distribution")
        assert httpx.post(url, content=b"{", headers={"authorization": "Bearer wrong"}).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=30) == 0
        except subprocess.TimeoutExpired:
            proc.kill()  # no stack left running behind the suite
            raise
    assert not endpoints_file.exists()  # the CLI's --local file goes away with the stack
