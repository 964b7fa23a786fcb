"""`tagpin local` and the CLI as a user runs them: real processes, the README's kubectl walkthrough
against the local stack's real API server, an image pushed with `tagpin local push`, and every
command's stdout and stderr as printed."""

from __future__ import annotations

import json
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tagpin_cli.main import LOCAL_RECONCILE_INTERVAL, build_parser

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


README = Path(__file__).resolve().parents[2] / "README.md"
WALKTHROUGH = "# kubectl, as the cluster's admin"  # where the README's kubectl lines start


def walkthrough() -> list[tuple[str, str | None]]:
    """The README's kubectl walkthrough, command by command (a command line, its heredoc), up to
    ``tagpin doctor``: what a reader pastes, run here as it is written."""
    text = README.read_text()
    lines = text[text.index(WALKTHROUGH) :].splitlines()
    commands: list[tuple[str, str | None]] = []
    i = 0
    while not lines[i].startswith(".venv/bin/tagpin doctor"):
        line = lines[i].split("  #", 1)[0].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        heredoc = None
        if line.endswith("<<EOF"):
            body = []
            while lines[i] != "EOF":
                body.append(lines[i])
                i += 1
            i += 1
            heredoc, line = "\n".join(body) + "\n", line.removesuffix("<<EOF").strip()
        commands.append((line, heredoc))
    return commands


def test_tagpin_local_runs_the_readme_walkthrough_with_kubectl(tmp_path: Path) -> None:
    """`tagpin local` as a process, then the README's kubectl lines as written (no workaround:
    client-side validation, server-side apply, rollout status, history and undo, auth can-i)."""
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
        endpoints = json.loads(first_line(proc, 120))
        assert (
            json.loads((tmp_path / ".tagpin-local/endpoints.json").read_text())["registry_url"]
            == (endpoints["registry_url"])
        )
        host = endpoints["registry_url"].split("://", 1)[1]
        env = {**os.environ, "KUBECACHEDIR": str(tmp_path / "c"), "HOME": str(tmp_path)}
        said: dict[str, str] = {}
        for line, stdin in walkthrough():
            line = line.replace("$REGISTRY", host).replace("$PWD", str(tmp_path))
            stdin = stdin.replace("$REGISTRY", host) if stdin is not None else None
            if line.startswith("python3 -c") and line.endswith("> local.kubeconfig"):
                (tmp_path / "local.kubeconfig").write_text(endpoints["kubeconfig"])
                continue
            if line.startswith("export KUBECONFIG="):
                env["KUBECONFIG"] = line.split("=", 1)[1]
                continue
            if line.startswith(".venv/bin/tagpin local push"):
                pushed = tagpin(tmp_path, *shlex.split(line)[1:], "--json")
                assert pushed.returncode == 0 and pushed.stderr == "", pushed.stderr
                digest = json.loads(pushed.stdout)["digest"]
                assert json.loads(pushed.stdout)["image"] == f"{host}/demo/api:stable"
                # Nothing else to do: the scheduled reconciler indexes the label, the tag is
                # resolved and the workload is patched to the digest.
                wait_until_patched(kubectl, env, digest)
                continue
            argv = shlex.split(line)
            assert argv[0] == "kubectl", line
            done = subprocess.run(
                [kubectl, *argv[1:]], input=stdin, capture_output=True, text=True, env=env, timeout=90,
                check=False,
            )  # fmt: skip
            assert done.returncode == 0 or argv[1:3] == ["auth", "can-i"], (line, done.stderr)
            assert "Warning" not in done.stderr and "error" not in done.stderr.lower(), (line, done.stderr)
            said[" ".join(argv[1:4])] = done.stdout
        assert said["apply -f -"].strip() == "deployment.apps/api created"  # validated client-side
        assert "successfully rolled out" in said["rollout status deployment/api"]
        assert [
            r.split()[0] for r in said["rollout history deployment/api"].splitlines()[2:] if r.strip()
        ] == [
            "1",
            "2",
        ]
        assert said["auth can-i patch"].strip() == "yes" and said["auth can-i delete"].strip() == "no"
        assert said["rollout undo deployment/api"].strip() == "deployment.apps/api rolled back"
        assert "serverside-applied" in said["apply --server-side --field-manager=gitops"]

        # The CLI in its own process: the global options after the command, one JSON document on
        # stdout, nothing on stderr (no unclosed session of the registry client).
        status = tagpin(tmp_path, "status", "--local", "--json")
        assert status.returncode == 0 and status.stderr == ""
        (row,) = [r for r in json.loads(status.stdout) if r["image"] == f"{host}/demo/api:stable"]
        assert row["targets"][0]["source"] == "label"
        for args in (
            ["--local", "--json", "plan"],
            ["resolve", f"{host}/demo/api:stable", "--local", "--json"],
        ):
            done = tagpin(tmp_path, *args)
            # plan exits 4 when it plans a roll: api right after the undo, until the reconciler
            # (every 15 s) sees a person's change and holds it
            assert done.returncode in (0, 4) and done.stderr == "", (args, done.stderr)
            json.loads(done.stdout)
        table = tagpin(tmp_path, "--local", "status")
        assert table.returncode == 0 and table.stderr == ""
        assert "followed tags" in table.stdout and "label" in table.stdout
        failed = tagpin(tmp_path, "--local", "--json", "resolve", f"{host}/demo/api:nosuch")
        assert failed.returncode == 1 and failed.stdout == ""
        assert failed.stderr.startswith("error: ManifestNotFound") and failed.stderr.count("\n") == 1
        assert tagpin(tmp_path, "local", "push", "no-tag").returncode == 2
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        log.close()
    assert proc.returncode == 0
    assert proc.stdout is not None and proc.stdout.read() == ""  # one line on stdout, ever
    assert not (tmp_path / ".tagpin-local/endpoints.json").exists()
    assert '"_aws"' in (tmp_path / "functions.log").read_text()  # the functions' metrics: stderr


def wait_until_patched(kubectl: str, env: dict[str, str], digest: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    image = ""
    while time.monotonic() < deadline:
        done = subprocess.run(
            [kubectl, "get", "deployment", "api", "-o", "jsonpath={.spec.template.spec.containers[0].image}"],
            capture_output=True, text=True, env=env, timeout=30, check=True,
        )  # fmt: skip
        image = done.stdout
        if image.endswith("@" + digest):
            return
        time.sleep(1)
    raise AssertionError(f"not patched to {digest} within {timeout:.0f} s: {image}")


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
