"""The poller's garbage collector settings (``tagpin.wiring.poll_gc``) are applied where a poll
runs: by the poller's handler when it loads, and by ``bench/poll.py``'s worker before its poll
(the bench measures what the function runs with). Each check runs in a fresh interpreter: the
test process's own collector is left as it is."""

from __future__ import annotations

import argparse

import pytest
from tagpin.wiring.poll_gc import YOUNG

import bench.poll
from tests.support.constants import ROOT
from tests.support.fresh import run_fresh

HANDLER_ENV = {  # what the handler's import checks (TAGPIN_*), nothing reachable
    "PATH": "/usr/bin:/bin",
    "PYTHONPATH": str(ROOT / "layers/common"),
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
    "TAGPIN_STATE_TABLE": "tagpin-state",
    "TAGPIN_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/changes.fifo",
    "POWERTOOLS_SERVICE_NAME": "poller",
}

COLLECTOR = """
import gc, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)
print(json.dumps({"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}))
"""

BENCH = """
import gc, json, sys
sys.path[:0] = [sys.argv[1]]
from bench.poll import collect_as_the_poller
collect_as_the_poller()
print(json.dumps({"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}))
"""


def test_the_poller_handler_sets_the_collector_when_it_loads() -> None:
    found = run_fresh(COLLECTOR, ROOT / "functions" / "poller" / "app.py", HANDLER_ENV)
    assert found["young"] == YOUNG
    assert found["frozen"] > 0  # what the handler's import loaded is out of the collector's walks


def test_the_poll_bench_worker_sets_the_collector_as_the_handler() -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "layers/common")}
    found = run_fresh(BENCH, ROOT, env)
    assert found["young"] == YOUNG
    assert found["frozen"] > 0


def test_the_poll_bench_worker_sets_the_collector_before_anything_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Applied(Exception):
        pass

    def applied() -> None:
        raise Applied

    monkeypatch.setattr(bench.poll, "collect_as_the_poller", applied)
    with pytest.raises(Applied):
        bench.poll.worker(argparse.Namespace())
