"""The real control plane in tests (tools/tagpin_local/kube): the session's pool that lends clusters
to every local stack, a cluster of a test module's own, their start-up time and memory printed on
the terminal (figures, never assertions)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tagpin_local.kube import KubeCluster, missing, procs
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.pool import ClusterPool, default_source, use

from tests.support.waiting import wait_for  # noqa: F401  (the one wait_for, imported from here too)


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


def cluster(name: str = "local") -> Iterator[KubeCluster]:
    """A cluster lent by the session's pool for a test module (see :func:`require_built`), reset
    when given back. Its start-up phases and memory go to the terminal summary."""
    require_built()
    source = default_source()
    lent = source.acquire([name])
    kube = lent[name]
    phases = ", ".join(f"{k} {v:.2f}" for k, v in kube.timings.items())
    SUMMARY.append(f"kube {kube.name}: started in {kube.timings['total']:.1f} s ({phases})")
    try:
        yield kube
    finally:
        SUMMARY.append(f"kube {kube.name}: RSS after a module's tests {mib(kube.rss())}")
        source.release(lent)


def local_cluster(name: str) -> Iterator[LocalCluster]:
    """A lent cluster (:func:`cluster`) as tagpin's client sees it, named ``name`` in its config."""
    for lent in cluster():
        local = LocalCluster(lent, name)
        yield local
        local.close()


SUMMARY: list[str] = []  # lines for the terminal summary (tests/conftest.py prints them)


def watch_until(
    kube: LocalCluster,
    kind: str,
    namespace: str,
    name: str,
    since: str,
    what: str,
    probe: Callable[[dict[str, Any]], bool],
    timeout: float = 60.0,
) -> list[dict[str, Any]]:
    """Every state of one object the API server stored after resourceVersion ``since``, in order,
    up to the first ``probe`` accepts. A WATCH delivers each write, so a state that lasts a moment
    (a pause of 2 s, a status a controller overwrites at once) is seen however slow the test is,
    where polling with :func:`wait_for` may miss it."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        for state in kube.watch(kind, namespace, name, since, timeout=max(1, int(left))):
            seen.append(state)
            since = state["metadata"]["resourceVersion"]
            if probe(state):
                return seen
    shown = [(s.get("status") or {}).get("phase") for s in seen]
    raise AssertionError(f"timed out waiting for {what} (the states seen, by phase: {shown})")


class SessionPool(ClusterPool):
    """The session's pool: a stack that needs the control plane skips (fails under CI=true) when it
    is not built."""

    def acquire(self, names: list[str]) -> dict[str, KubeCluster]:
        require_built()
        return super().acquire(names)


@contextlib.contextmanager
def lend(pool: ClusterPool) -> Iterator[ClusterPool]:
    """Every stack without a source of its own borrows from ``pool`` meanwhile; then the pool is
    stopped, its figures printed, and nothing it started may still run."""
    use(pool)
    try:
        yield pool
    finally:
        use(None)
        now = pool.sample()
        pool.close()
        if pool.started:
            SUMMARY.append(
                f"kube pool: {pool.started} control planes started in {pool.start_s:.1f} s, lent "
                f"{pool.lends} times; resets {pool.reset_s:.1f} s in all (in the background), waited "
                f"for {pool.waited_s:.1f} s; RSS peak {pool.peak_rss / 2**20:.0f} MiB, at the end "
                f"{now / 2**20:.0f} MiB"
            )
        SUMMARY.extend(f"kube pool: not reset, stopped: {failure}" for failure in pool.failures)
        left = procs.running()
        assert not left, f"still running after the session: {[p.name for p in left]}"
