"""Each result records the machine's reference time beside its load (``bench/runinfo``), and the
README's table shows it, so wall figures of runs on different days can be read against it."""

from __future__ import annotations

from bench import figures
from bench.runinfo import Run


def test_a_run_records_its_reference_time() -> None:
    record = Run.begin("poll").record()
    assert 0 < record["reference_ms"] < 10_000


def test_the_table_shows_the_reference_and_reads_results_without_one() -> None:
    run = {"date": "2026-11-27T10:00:00", "commit": "abcdef0123", "load_start": 1.0, "load_end": 2.0}
    assert figures.measured({"run": run}) == "2026-11-27, abcdef0, load 1.0-2.0"
    assert figures.measured({"run": {**run, "reference_ms": 14.26}}).endswith("load 1.0-2.0, ref 14 ms")
