"""The overlap pools' workers started ahead (``overlap.start_workers``, which ``tagpin.warming`` calls
at a container's start): the round trips an invocation overlaps afterwards start no thread. In a
process of its own: the pools are the process's, and other tests' calls start their workers."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.constants import ROOT

PROBE = """
import json, threading
from tagpin.usecases import overlap

def workers():
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(overlap.WORKER_PREFIXES))

overlap.start_workers()
started = workers()
overlap.all_of([lambda: 1, lambda: 2, lambda: 3])
overlap.ask_registry(lambda: 4).result()
overlap.start_workers()  # a second container's warming: nothing more
print(json.dumps({"started": started, "after": workers()}))
"""


def test_started_workers_are_the_ones_the_calls_use() -> None:
    env = {"PYTHONPATH": str(ROOT / "layers" / "common")}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True)
    found = json.loads(out.stdout)
    from tagpin.usecases import overlap

    pool, registries = overlap.WORKER_PREFIXES
    assert sum(n.startswith(pool) for n in found["started"]) == overlap.WORKERS, found
    assert sum(n.startswith(registries) for n in found["started"]) == overlap.REGISTRY_WORKERS_STARTED, found
    assert found["after"] == found["started"], found
