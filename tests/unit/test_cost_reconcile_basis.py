"""A cost run whose sizes include none with a measured reconcile (``--sizes 10000`` on its own)
still writes its results: the reconcile is scaled from the largest one in stored results of an
earlier run, and the output and the record say which run (bench/cost/report.py). Driven as the
command (``python -m bench.cost --from-results``, which estimates stored measurements again)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.cost import ROOT

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def measurement(scale: float = 1.0) -> dict[str, Any]:
    return {
        "what": "x",
        "invocations": {"f": 1},
        "duration_ms": [100.0 * scale],
        "cpu_ms": [50.0 * scale],
        "aws_calls": {"dynamodb:Query": round(10 * scale)},
        "dynamodb_rru": 20.0 * scale,
        "dynamodb_wru": 1.0,
        "registry_requests": {"HEAD": round(scale)},
        "kubernetes_requests": {"GET": 1},
        "log_bytes": 1000,
    }


def row(n: int, reconcile: bool) -> dict[str, Any]:
    found = {
        "n": n,
        "steady_poll": measurement(n / 100),
        "poll_one_change": measurement(n / 100),
        "consumer_one_change": measurement(),
        "verification_one_change": measurement(),
        "webhook_one_change": measurement(),
        "table_bytes": {"tagpin-state": 100 * n},
    }
    if reconcile:
        found["steady_reconcile"] = measurement(n / 100)
    return found


def document(*rows: dict[str, Any], run: bool = True) -> dict[str, Any]:
    doc: dict[str, Any] = {"seconds": 1.0, "custom_metrics_seen": [], "measured": list(rows)}
    if run:
        doc["run"] = {"bench": "cost", "commit": COMMIT, "date": "2026-11-26T19:42:18+00:00"}
    return doc


def cost(results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.cost", "--from-results", "--results", str(results), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def reconcile_lines(doc: dict[str, Any], n: int) -> dict[str, float]:
    (found,) = (e for e in doc["estimate"] if e["n"] == n)
    return {k: v for k, v in found["lines"].items() if k.startswith("reconcile")}


def test_a_size_alone_takes_its_reconcile_from_stored_results_and_says_so(tmp_path: Path) -> None:
    stored, alone = tmp_path / "cost.json", tmp_path / "cost-10000.json"
    stored.write_text(json.dumps(document(row(100, True), row(1000, True))))
    alone.write_text(json.dumps(document(row(10_000, False))))

    done = cost(alone, "--reconcile-from", str(stored))
    assert done.returncode == 0, done.stderr
    source = f"{stored}, the run at {COMMIT[:7]} on 2026-11-26T19:42:18+00:00"
    assert f"N=10,000's reconcile (extrap.) scaled linearly from N=1,000's steady reconcile, {source}" in (
        done.stdout
    )
    written = json.loads(alone.read_text())
    (measured,) = written["measured"]
    assert measured["reconcile_basis_from"] == source
    assert measured["reconcile_basis_n"] == 1000
    assert measured["reconcile_basis"] == row(1000, True)["steady_reconcile"]
    (estimated,) = written["estimate"]
    assert estimated["reconcile_extrapolated"] and estimated["reconcile_basis_from"] == source

    # the same figure as a run that measured 1,000 beside it (a stored record without the new fields)
    together = tmp_path / "together.json"
    together.write_text(
        json.dumps(document(row(1000, True), row(10_000, False) | {"reconcile_basis_n": 1000}))
    )
    done = cost(together)
    assert done.returncode == 0, done.stderr
    assert "steady reconcile, measured in the same run" in done.stdout
    both = json.loads(together.read_text())
    assert "reconcile_basis" not in both["measured"][1]
    assert reconcile_lines(both, 10_000) == reconcile_lines(written, 10_000)
    assert reconcile_lines(written, 10_000)["reconcile (steady): DynamoDB"] > 0

    # estimated again from its own record: the basis travels with it
    stored.unlink()
    done = cost(alone, "--reconcile-from", str(stored))
    assert done.returncode == 0, done.stderr
    assert json.loads(alone.read_text())["measured"][0]["reconcile_basis_from"] == source


def test_no_reconcile_anywhere_is_a_clear_error(tmp_path: Path) -> None:
    alone, stored = tmp_path / "cost-10000.json", tmp_path / "stored.json"
    alone.write_text(json.dumps(document(row(10_000, False))))
    stored.write_text(json.dumps(document(row(10_000, False))))
    for missing in (stored, tmp_path / "none.json"):
        done = cost(alone, "--reconcile-from", str(missing))
        assert done.returncode == 1
        assert "no steady reconcile was measured in this run and none is stored in" in done.stderr
        assert "estimate" not in json.loads(alone.read_text())
