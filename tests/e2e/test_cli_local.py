"""`tagpin local` and the CLI as a user runs them: real processes, a workload labelled with kubectl,
an image pushed with `tagpin local push`, and every command's stdout and stderr as printed. What
`tagpin local` prints (its JSON line, its log on stderr) and what the commands print hold none of the
secrets its endpoints file keeps (the console's token, the kubeconfig's bearer token)."""

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
import yaml
from tagpin_cli.local import RECONCILE_INTERVAL
from tagpin_cli.parser import build_parser
from tagpin_local.kubesim import deployment

from tests.conftest import require_binary
from tests.support.cli import Ran, assert_no_secret, failure

pytestmark = pytest.mark.e2e


def tagpin(cwd: Path, *args: str, timeout: float = 60) -> Ran:
    """`python -m tagpin_cli.main` (with ResourceWarnings shown: no unclosed session)."""
    done = subprocess.run(
        [sys.executable, "-W", "default::ResourceWarning", "-m", "tagpin_cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Ran(tuple(args), done.returncode, done.stdout, done.stderr)


def first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            pytest.fail(f"`tagpin local` printed nothing in {timeout} s")
    return proc.stdout.readline()


def test_the_local_command_runs_the_reconciler_by_default() -> None:
    args = build_parser().parse_args(["local"])
    assert args.reconcile_interval == RECONCILE_INTERVAL and 0 < RECONCILE_INTERVAL <= 30
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
    runs: list[Ran] = []
    try:
        line = first_line(proc, 90)
        endpoints = json.loads(line)
        # the file holds the secrets (readable by its owner only); the line printed, none of them
        path = tmp_path / ".tagpin-local/endpoints.json"
        saved = json.loads(path.read_text())
        assert path.stat().st_mode & 0o777 == 0o600
        assert saved == endpoints | {
            "console_token": saved["console_token"],
            "kubeconfig": saved["kubeconfig"],
        }
        assert "console_token" not in endpoints and "kubeconfig" not in endpoints
        kube_token = yaml.safe_load(saved["kubeconfig"])["users"][0]["user"]["token"]
        secrets = {saved["console_token"], kube_token}
        runs.append(Ran(("local",), 0, line, ""))
        host = endpoints["registry_url"].split("://", 1)[1]
        (tmp_path / "kubeconfig").write_text(saved["kubeconfig"])

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
        runs.append(pushed)
        assert pushed.code == 0 and pushed.err == "", pushed.err
        digest = pushed.json()["digest"]
        assert pushed.json()["image"] == f"{host}/demo/api:stable"

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
        # The patch shows in the cluster a moment before the consumer records it: until then the
        # target is pending.
        deadline = time.monotonic() + 30
        while True:
            status = tagpin(tmp_path, "status", "--local", "--json")
            runs.append(status)
            assert status.code == 0 and status.err == ""
            (row,) = [r for r in status.json() if r["image"] == f"{host}/demo/api:stable"]
            if row["targets"][0]["condition"] != "pending" or time.monotonic() > deadline:
                break
        assert row["targets"][0]["source"] == "label" and row["targets"][0]["condition"] == "current"
        for args in (
            ["--local", "--json", "plan"],
            ["resolve", f"{host}/demo/api:stable", "--local", "--json"],
            ["--local", "--json", "doctor"],
        ):
            done = tagpin(tmp_path, *args)
            runs.append(done)
            assert done.code == 0 and done.err == "", (args, done.err)
            done.json()
        table = tagpin(tmp_path, "--local", "status")
        runs.append(table)
        assert table.code == 0 and table.err == ""
        assert "followed tags" in table.out and "label" in table.out and "current" in table.out
        failed = tagpin(tmp_path, "--local", "--json", "resolve", f"{host}/demo/api:nosuch")
        runs.append(failed)
        assert failed.code == 1 and failed.out == ""
        assert failed.err.startswith("error: ManifestNotFound") and failed.err.count("\n") == 1
        pushed = tagpin(tmp_path, "local", "push", "demo/api:stable")  # the table form: one line
        runs.append(pushed)
        assert (pushed.code, pushed.err) == (0, "") and pushed.out.startswith(
            f"pushed {host}/demo/api:stable -> "
        )
        runs.append(no_tag := tagpin(tmp_path, "local", "push", "no-tag"))
        assert "give the image as REPO:TAG" in failure(no_tag, 2)
        (tmp_path / "elsewhere").mkdir()  # no endpoints file there: no local stack
        runs.append(elsewhere := tagpin(tmp_path / "elsewhere", "local", "push", "demo/api:stable"))
        assert "no local stack" in failure(elsewhere, 3)
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
    log_text = (tmp_path / "functions.log").read_text()
    assert '"_aws"' in log_text  # the functions' metrics: stderr
    assert "sign in with the console_token in .tagpin-local/endpoints.json" in log_text
    for ran in [*runs, Ran(("local",), 0, "", log_text)]:  # no secret in anything printed
        assert_no_secret(ran, secrets)


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
