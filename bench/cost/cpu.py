"""Count: the CPU time of the function's own threads during an invocation.

On this machine the local stack answers in the same process as the handler: moto (whose DynamoDB
Query sorts the whole table on every call), the front before the Kubernetes API server and the
registry proxy (the API server itself is a process of its own). Their CPU lengthens the handler's
wall time without being the function's work: at 1,000 tags, 80 % or more of a steady poll's wall
time is moto's. So each invocation's own CPU is counted apart: the invoking thread's
(``time.thread_time``) plus that of the helper threads the function starts (its thread pools and the
registry client's event loop), read from ``/proc/self/task`` while they live and when they end. The
model (``model.py``) turns it into a Lambda duration with the CPU share Lambda gives the memory
size, plus the waits on the network.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

# The function's helper threads, by name prefix (the rest are the local stack's servers).
HELPERS = ("ThreadPoolExecutor", "tagpin-registry")


class _Ended:
    """CPU seconds of the helper threads that have ended (the patch below adds to it)."""

    lock = threading.Lock()
    seconds = 0.0
    installed = False


def _helper(name: str) -> bool:
    return name.startswith(HELPERS)


def install() -> None:
    """Count the CPU of helper threads when they end (once per process)."""
    if _Ended.installed:
        return
    original = threading.Thread.run

    def run(self: threading.Thread) -> None:
        started = time.thread_time()
        try:
            original(self)
        finally:
            if _helper(self.name):
                with _Ended.lock:
                    _Ended.seconds += time.thread_time() - started

    threading.Thread.run = run  # type: ignore[method-assign]
    _Ended.installed = True


def helpers_cpu_s() -> float:
    """CPU seconds of every helper thread so far: ended ones plus the live ones (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    live = 0.0
    for thread in threading.enumerate():
        if not _helper(thread.name) or thread.native_id is None:
            continue
        try:
            with open(f"/proc/self/task/{thread.native_id}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile: counted in _Ended
        live += (int(fields[11]) + int(fields[12])) / tick
    with _Ended.lock:
        return _Ended.seconds + live


class Invocation:
    """CPU seconds of one invocation: the calling thread's and the helpers' started meanwhile."""

    def __init__(self) -> None:
        self._thread = time.thread_time()
        self._helpers = helpers_cpu_s()

    def cpu_ms(self) -> float:
        return ((time.thread_time() - self._thread) + (helpers_cpu_s() - self._helpers)) * 1000


def describe() -> dict[str, Any]:
    return {"helpers": list(HELPERS), "clock_ticks_per_s": os.sysconf("SC_CLK_TCK")}
