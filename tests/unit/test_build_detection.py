"""What `make` decides about the build machine, run as make and the detection script run: which
Python 3.13 the Makefile takes (tools/find-python) and which wheel platform the
KubernetesLayer's import smoke test installs for the host (layers/kubernetes/Makefile).

Each test runs with a PATH of its own: a directory holding the tools the scripts use (bash, make,
grep, ...) and fakes: a ``python`` that is 3.11 (the real interpreter, with a ``sitecustomize`` that
says 3.11, as a pyenv global 3.11 would), a ``python3.13`` that is the interpreter running these
tests, a failing pyenv shim, a ``pyenv`` that lists versions, a ``uname`` that says what a Mac says.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.constants import ROOT

FIND_PYTHON = ROOT / "tools" / "find-python"
TOOLS = ("bash", "sh", "make", "grep", "sort", "tail", "cat", "dirname", "env")
PYTHON = sys.executable  # the interpreter running the tests: 3.13, as the project's venv is


def _bin(tmp: Path) -> Path:
    """A directory with the tools the scripts need and no Python at all."""
    path = tmp / "bin"
    path.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (path / tool).symlink_to(found)
    return path


def _script(path: Path, text: str) -> Path:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path


def _python_311(bin_dir: Path, name: str) -> None:
    site = bin_dir.parent / "as-311"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("import sys\nsys.version_info = (3, 11, 7, 'final', 0)\n")
    _script(bin_dir / name, f'PYTHONPATH="{site}" exec "{PYTHON}" "$@"\n')


def _run(command: list[str], bin_dir: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(bin_dir), "HOME": str(bin_dir.parent)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)


def _version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": ""},
    )  # fmt: skip
    return out.stdout.strip()


def test_a_python_that_is_311_is_passed_over_for_python313(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    _python_311(bin_dir, "python")
    _python_311(bin_dir, "python3")
    (bin_dir / "python3.13").symlink_to(PYTHON)
    found = _run([str(FIND_PYTHON), "3.13"], bin_dir)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() and _version(found.stdout.strip()) == "3.13"
    # The Makefile takes what the script found (and the old `python -c ...` would have printed
    # nothing, exited 0, and left PY313 empty).
    shown = _run(
        ["make", "--no-print-directory", "--eval", "show-py: ; @echo PY313=$(PY313)", "show-py"], bin_dir
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"PY313={found.stdout.strip()}"


def test_a_failing_pyenv_shim_is_passed_over_too(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    _python_311(bin_dir, "python")
    _script(bin_dir / "python3.13", 'echo "pyenv: python3.13: command not found" >&2\nexit 127\n')
    (bin_dir / "python3").symlink_to(PYTHON)  # python3 is 3.13 on this machine
    found = _run([str(FIND_PYTHON)], bin_dir)
    assert found.returncode == 0 and _version(found.stdout.strip()) == "3.13"


def test_pyenvs_newest_313_when_no_313_is_on_path(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    _python_311(bin_dir, "python")
    _python_311(bin_dir, "python3")
    root = tmp_path / "pyenv"
    for version in ("3.13.5", "3.13.10", "3.12.1"):
        (root / "versions" / version / "bin").mkdir(parents=True)
        (root / "versions" / version / "bin" / f"python{version.rsplit('.', 1)[0]}").symlink_to(PYTHON)
    listing = "3.11.7\\n3.12.1\\n3.13.5\\n3.13.10\\n3.13.10t\\n"
    _script(
        bin_dir / "pyenv",
        f'case "$1" in root) echo "{root}";; versions) printf "{listing}";; *) exit 1;; esac\n',
    )
    found = _run([str(FIND_PYTHON), "3.13"], bin_dir)
    assert found.returncode == 0, found.stderr
    # the newest patch version by number (3.13.10, not 3.13.5), never a name the script was given
    assert found.stdout.strip() == f"{root}/versions/3.13.10/bin/python3.13"


def test_no_313_anywhere_prints_nothing_and_make_says_so(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    _python_311(bin_dir, "python")
    _python_311(bin_dir, "python3")
    found = _run([str(FIND_PYTHON), "3.13"], bin_dir)
    assert (found.returncode, found.stdout) == (1, "")
    venv = tmp_path / "repo"
    (venv / "tools").mkdir(parents=True)
    shutil.copy(FIND_PYTHON, venv / "tools" / "find-python")
    shutil.copy(ROOT / "Makefile", venv / "Makefile")
    for name in ("requirements-dev.txt", "requirements-sam.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, venv / name)
    for name in (
        "layers/common",
        "layers/kubernetes",
        "layers/git",
        "functions/webhook",
        "functions/console",
    ):
        (venv / name).mkdir(parents=True)
        shutil.copy(ROOT / name / "requirements.txt", venv / name / "requirements.txt")
    made = _run(["make", "--no-print-directory", "venv"], bin_dir, cwd=venv)
    assert made.returncode != 0
    assert "Python 3.13 not found" in made.stderr and not (venv / ".venv").exists()


def _layer_commands(bin_dir: Path, tmp: Path) -> str:
    made = _run(
        ["make", "-n", "-f", str(ROOT / "layers" / "kubernetes" / "Makefile"), "build-KubernetesLayer",
         f"ARTIFACTS_DIR={tmp / 'artifacts'}"],
        bin_dir,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return made.stdout


@pytest.mark.parametrize(
    ("system", "machine", "host_flags"),
    [
        # Apple silicon: no manylinux wheel imports on macOS: pip picks the host's own (no --platform)
        ("Darwin", "arm64", ""),
        ("Darwin", "x86_64", ""),
        # Linux on x86_64: the compiled distributions again, for manylinux x86_64
        ("Linux", "x86_64", "--platform manylinux2014_x86_64 --implementation cp --python-version 3.13"),
        # Linux hosts that say "arm64" and those that say "aarch64": the layer's own platform
        ("Linux", "arm64", None),
        ("Linux", "aarch64", None),
    ],
)
def test_the_smoke_test_installs_wheels_the_host_can_import(
    tmp_path: Path, system: str, machine: str, host_flags: str | None
) -> None:
    bin_dir = _bin(tmp_path)
    _script(bin_dir / "uname", f'case "$1" in -s) echo {system};; -m) echo {machine};; esac\n')
    commands = _layer_commands(bin_dir, tmp_path)
    assert "manylinux2014_arm64" not in commands  # a platform no wheel is built for
    (smoke,) = [line for line in commands.splitlines() if line.startswith("if [ ")]
    layer, host = smoke.split('"')[1], smoke.split('"')[3]
    assert layer == "manylinux2014_aarch64"
    lines = commands.splitlines()
    (install,) = [i for i, line in enumerate(lines) if "-m pip install -q --no-deps" in line]
    flags = lines[install].split("--only-binary=:all:", 1)[1].rstrip(" \\").strip()
    if host_flags is None:  # the host imports the layer's own wheels: nothing is installed again
        assert host == layer
    else:
        assert host != layer and flags == host_flags
