"""`tagpin local` and the CLI as a user runs them: real processes, the README's kubectl walkthrough
against the local stack's real API server, an image pushed with `tagpin local push`, and every
command's stdout and stderr as printed. What `tagpin local` prints (its JSON line, its log on stderr)
and what the commands print hold none of the secrets its endpoints file keeps (the console's token,
the kubeconfig's credentials)."""

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
from typing import Any

import pytest
import yaml
from tagpin_cli.local import RECONCILE_INTERVAL
from tagpin_cli.parser import build_parser

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
    runs: list[Ran] = []
    try:
        line = first_line(proc, 120)
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
        user = yaml.safe_load(saved["kubeconfig"])["users"][0]["user"]  # the admin's: a client key
        secrets = {saved["console_token"], *(user[k] for k in ("token", "client-key-data") if k in user)}
        assert len(secrets) == 2
        runs.append(Ran(("local",), 0, line, ""))
        host = endpoints["registry_url"].split("://", 1)[1]
        env = {**os.environ, "KUBECACHEDIR": str(tmp_path / "c"), "HOME": str(tmp_path)}
        said: dict[str, str] = {}
        for line, stdin in walkthrough():
            line = line.replace("$REGISTRY", host).replace("$PWD", str(tmp_path))
            stdin = stdin.replace("$REGISTRY", host) if stdin is not None else None
            if line.startswith("python3 -c") and line.endswith("> local.kubeconfig"):
                (tmp_path / "local.kubeconfig").write_text(saved["kubeconfig"])
                continue
            if line.startswith("export KUBECONFIG="):
                env["KUBECONFIG"] = line.split("=", 1)[1]
                continue
            if line.startswith(".venv/bin/tagpin local push"):
                pushed = tagpin(tmp_path, *shlex.split(line)[1:], "--json")
                runs.append(pushed)
                assert pushed.code == 0 and pushed.err == "", pushed.err
                digest = pushed.json()["digest"]
                assert pushed.json()["image"] == f"{host}/demo/api:stable"
                # Nothing else to do: the scheduled reconciler indexes the label, the tag is
                # resolved and the workload is patched to the digest.
                wait_until_patched(kubectl, env, digest)
                status, row = wait_for_status(tmp_path, host)
                runs.append(status)
                assert [(t["source"], t["condition"]) for t in row["targets"]] == [("label", "current")]
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
        for args in (
            ["--local", "--json", "plan"],
            ["resolve", f"{host}/demo/api:stable", "--local", "--json"],
            ["--local", "--json", "doctor"],
        ):
            done = tagpin(tmp_path, *args)
            runs.append(done)
            # plan exits 4 when it plans a roll: api right after the undo, until the reconciler
            # (every 15 s) sees a person's change and holds it
            assert done.code in ((0, 4) if "plan" in args else (0,)) and done.err == "", done
            done.json()
        table = tagpin(tmp_path, "--local", "status")
        runs.append(table)
        assert table.code == 0 and table.err == ""
        assert "followed tags" in table.out and "label" in table.out
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
            proc.wait(timeout=60)
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


def wait_for_status(cwd: Path, host: str, timeout: float = 30) -> tuple[Ran, dict[str, Any]]:
    """`tagpin status --json` until api's target leaves 'pending' (the patch shows in the cluster a
    moment before the consumer records it): the last run and its row of demo/api:stable."""
    deadline = time.monotonic() + timeout
    while True:
        status = tagpin(cwd, "status", "--local", "--json")
        assert status.code == 0 and status.err == "", status
        (row,) = [r for r in status.json() if r["image"] == f"{host}/demo/api:stable"]
        if row["targets"][0]["condition"] != "pending" or time.monotonic() > deadline:
            return status, row


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
