"""The real control plane in tests (tools/tagpin_local/kube): one per test module, its start-up
time and memory printed on the terminal (figures, never assertions)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tagpin_local.kube import KubeCluster, missing


def report(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


def mib(rss: dict[str, int]) -> str:
    parts = ", ".join(f"{name} {value / 2**20:.0f}" for name, value in rss.items())
    return f"{sum(rss.values()) / 2**20:.0f} MiB ({parts})"


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def require_built() -> None:
    """Fail under CI=true (skip elsewhere) when the control plane is not built on this machine."""
    absent = missing()
    if absent:
        message = f"the control plane is not built ({', '.join(absent)}): run `make kube-tools`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def cluster(config: pytest.Config, name: str) -> Iterator[KubeCluster]:
    """A started cluster (see :func:`require_built`). After it is stopped, none of its processes runs."""
    require_built()
    with KubeCluster(name) as kube:
        phases = ", ".join(f"{k} {v:.2f}" for k, v in kube.timings.items())
        report(config, f"\nkube {name}: started in {kube.timings['total']:.1f} s ({phases})")
        report(config, f"kube {name}: RSS after start {mib(kube.rss())}")
        pids = [p.pid for p in kube.processes.values() if p.pid is not None]
        yield kube
        report(config, f"\nkube {name}: RSS after the tests {mib(kube.rss())}")
    assert not [pid for pid in pids if alive(pid)], "a process of the control plane outlived stop()"


def wait_for[T](what: str, probe: Callable[[], T | None], timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
