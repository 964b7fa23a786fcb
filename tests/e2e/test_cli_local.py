"""`tagpin local` and the CLI as a user runs them: real processes, a workload labelled with kubectl,
an image pushed with `tagpin local push`, and every command's stdout and stderr as printed."""

from __future__ import annotations

import json
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tagpin_cli.main import LOCAL_RECONCILE_INTERVAL, build_parser
from tagpin_local.kubesim import deployment

from tests.conftest import require_binary

pytestmark = pytest.mark.e2e


def tagpin(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "default::ResourceWarning", "-m", "tagpin_cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            pytest.fail(f"`tagpin local` printed nothing in {timeout} s")
    return proc.stdout.readline()


def test_the_local_command_runs_the_reconciler_by_default() -> None:
    args = build_parser().parse_args(["local"])
    assert args.reconcile_interval == LOCAL_RECONCILE_INTERVAL and 0 < LOCAL_RECONCILE_INTERVAL <= 30
    assert build_parser().parse_args(["local", "--reconcile-interval", "0"]).reconcile_interval == 0


def test_tagpin_local_follows_a_workload_labelled_with_kubectl(tmp_path: Path) -> None:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    kubectl = require_binary("kubectl")
    log = (tmp_path / "functions.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tagpin_cli.main", "local", "--empty"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        endpoints = json.loads(first_line(proc, 90))
        assert (
            json.loads((tmp_path / ".tagpin-local/endpoints.json").read_text())["registry_url"]
            == (endpoints["registry_url"])
        )
        host = endpoints["registry_url"].split("://", 1)[1]
        (tmp_path / "kubeconfig").write_text(endpoints["kubeconfig"])

        def kube(*args: str) -> str:
            done = subprocess.run(
                [
                    kubectl,
                    "--kubeconfig",
                    str(tmp_path / "kubeconfig"),
                    "--cache-dir",
                    str(tmp_path / "c"),
                    *args,
                ],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        manifest = tmp_path / "api.json"
        manifest.write_text(json.dumps(deployment("api", "default", f"{host}/demo/api:stable", replicas=1)))
        kube("apply", "--validate=false", "-f", str(manifest))
        assert "labeled" in kube("label", "deployment", "api", "tagpin.dev/follow=true")

        pushed = tagpin(tmp_path, "local", "push", "demo/api:stable", "--json")
        assert pushed.returncode == 0 and pushed.stderr == "", pushed.stderr
        digest = json.loads(pushed.stdout)["digest"]
        assert json.loads(pushed.stdout)["image"] == f"{host}/demo/api:stable"

        # Nothing else to do: the scheduled reconciler indexes the label, the tag is resolved and
        # the workload is patched to the digest.
        deadline = time.monotonic() + 90
        image = ""
        while time.monotonic() < deadline:
            live = json.loads(kube("get", "deployment", "api", "-o", "json"))
            image = live["spec"]["template"]["spec"]["containers"][0]["image"]
            if image.endswith("@" + digest):
                break
            time.sleep(1)
        assert image == f"{host}/demo/api:stable@{digest}"

        # The CLI in its own process: the global options after the command, one JSON document on
        # stdout, nothing on stderr (no unclosed session of the registry client).
        status = tagpin(tmp_path, "status", "--local", "--json")
        assert status.returncode == 0 and status.stderr == ""
        (row,) = [r for r in json.loads(status.stdout) if r["image"] == f"{host}/demo/api:stable"]
        assert row["targets"][0]["source"] == "label" and row["targets"][0]["condition"] == "current"
        for args in (
            ["--local", "--json", "plan"],
            ["resolve", f"{host}/demo/api:stable", "--local", "--json"],
        ):
            done = tagpin(tmp_path, *args)
            assert done.returncode == 0 and done.stderr == "", (args, done.stderr)
            json.loads(done.stdout)
        table = tagpin(tmp_path, "--local", "status")
        assert table.returncode == 0 and table.stderr == ""
        assert "followed tags" in table.stdout and "label" in table.stdout and "current" in table.stdout
        failed = tagpin(tmp_path, "--local", "--json", "resolve", f"{host}/demo/api:nosuch")
        assert failed.returncode == 1 and failed.stdout == ""
        assert failed.stderr.startswith("error: ManifestNotFound") and failed.stderr.count("\n") == 1
        assert tagpin(tmp_path, "local", "push", "no-tag").returncode == 2
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        log.close()
    assert proc.returncode == 0
    assert proc.stdout is not None and proc.stdout.read() == ""  # one line on stdout, ever
    assert not (tmp_path / ".tagpin-local/endpoints.json").exists()
    assert '"_aws"' in (tmp_path / "functions.log").read_text()  # the functions' metrics: stderr


def test_readme_push_command_with_skopeo(tmp_path: Path) -> None:
    """The README's copy-pasteable push: skopeo copies an image into the local registry."""
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        require_binary("skopeo")
    from tagpin_local.oci import push_image
    from tagpin_local.registry_server import RegistryServer

    with RegistryServer() as registry:
        digest = push_image(registry.url, "demo/source", "v1")
        done = subprocess.run(
            [
                "skopeo",
                "copy",
                "--src-tls-verify=false",
                "--dest-tls-verify=false",
                f"docker://{registry.host}/demo/source:v1",
                f"docker://{registry.host}/demo/web:stable",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        source = json.loads(
            subprocess.run(
                ["skopeo", "inspect", "--tls-verify=false", f"docker://{registry.host}/demo/source:v1"],
                capture_output=True,
                timeout=60,
                check=True,
            ).stdout
        )
        copied = json.loads(
            subprocess.run(
                ["skopeo", "inspect", "--tls-verify=false", f"docker://{registry.host}/demo/web:stable"],
                capture_output=True,
                timeout=60,
                check=True,
            ).stdout
        )
        assert source["Digest"] == digest and len(copied["Layers"]) == len(source["Layers"]) == 1
