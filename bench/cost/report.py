"""Print: the results document (bench/results/cost.json) and the table."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import ROOT
from .defaults import template_defaults
from .model import (
    AWS_CALL_MS,
    FULL_VCPU_MB,
    KUBERNETES_CALL_MS,
    REGISTRY_CONCURRENCY,
    REGISTRY_MS,
    billed_ms,
    estimate,
)
from .prices import FREE_TIER, HOURS_PER_MONTH, PRICE_DATE, PRICES

RESULTS = ROOT / "bench" / "results" / "cost.json"
SAME_RUN = "measured in the same run"


def reconcile_basis(rows: list[dict[str, Any]], stored: Path) -> Callable[[], dict[str, Any]]:
    """Where a size whose reconcile was not measured (above ``--reconcile-max``) takes it from, to
    scale it linearly: the largest size measured in the same run, else the largest in the stored
    results of an earlier run (``--reconcile-from``, the run named in the record and printed). A
    measurement from elsewhere is kept in the row, so that ``--from-results`` estimates it again."""

    def found() -> dict[str, Any]:
        measured = [r for r in rows if "steady_reconcile" in r]
        if measured:
            row = max(measured, key=lambda r: r["n"])
            return {
                "reconcile_basis": row["steady_reconcile"],
                "reconcile_basis_n": row["n"],
                "reconcile_basis_from": SAME_RUN,
            }
        try:
            doc = json.loads(stored.read_text())
            row = max((r for r in doc["measured"] if "steady_reconcile" in r), key=lambda r: r["n"])
        except (OSError, ValueError, KeyError) as exc:
            raise SystemExit(
                f"no steady reconcile was measured in this run and none is stored in {stored} ({exc!r}): "
                "measure one (--reconcile-max at least the size, or a smaller size beside it) or name "
                "stored results with --reconcile-from"
            ) from exc
        run = doc.get("run") or {}
        source = f"{_shown(stored)}, the run at {str(run.get('commit', '?'))[:7]} on {run.get('date', '?')}"
        return {
            "reconcile_basis": row["steady_reconcile"],
            "reconcile_basis_n": row["n"],
            "reconcile_basis_from": source,
        }

    return found


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def write(
    previous: dict[str, Any],
    rows: list[dict[str, Any]],
    args: argparse.Namespace,
    seen: set[str],
    seconds: float,
    path: Path = RESULTS,
) -> None:
    defaults = template_defaults()
    basis = reconcile_basis(rows, getattr(args, "reconcile_from", RESULTS))
    for row in rows:
        if "steady_reconcile" not in row and "reconcile_basis" not in row:
            row.update(basis())
    # custom metrics exist only with DetailedMonitoring (opt-in; the bench turns them on to see them)
    metrics = len(seen) if defaults.get("detailed_monitoring") else 0
    estimates = [estimate(row, defaults, args, metrics) for row in rows]
    for row in rows:  # a basis from this run's rows is there already; one from elsewhere is kept
        if row.get("reconcile_basis_from") == SAME_RUN:
            row.pop("reconcile_basis", None)
    doc = {
        "what": "monthly cost of tagpin at the template's defaults, from API calls measured per operation",
        "machine": previous.get("machine")
        or {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "seconds": seconds,
        "defaults": defaults,
        "assumptions": {
            "changes_per_1000_tags_per_day": args.changes_per_1000_per_day,
            "targets_per_tag": 1,
            "clusters": args.clusters,
            "registries_with_credentials": args.registries_with_credentials,
            "secret_store": getattr(args, "secret_store", None) or defaults["secret_store"],
            "sqs_event_source_idle_receives_per_minute_per_queue": args.esm_receives_per_minute,
            "detection": "by the poll (the webhook path is priced per change separately)",
            "hours_per_month": HOURS_PER_MONTH,
            "lambda_duration": (
                "modelled where the function's own CPU was measured (bench/cost/cpu.py): CPU ms x "
                f"max(1, {FULL_VCPU_MB} / memory MB) + {AWS_CALL_MS:.0f} ms per AWS call + "
                f"{KUBERNETES_CALL_MS:.0f} ms per Kubernetes request + {REGISTRY_MS:.0f} ms per "
                f"{REGISTRY_CONCURRENCY} registry requests, all serial; else the handler's wall time "
                "against moto on this machine (pessimistic: moto's CPU is in it)"
            ),
        },
        "price_date": PRICE_DATE,
        "prices_usd": PRICES,
        "free_tier": FREE_TIER,
        "custom_metrics_seen": sorted(seen),
        "measured": rows,
        "estimate": estimates,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print_table(doc, path)


MODEL_NS = (10_000, 100_000)
VM_USD_MONTH = 6.0  # a small VM running an in-cluster peer (the comparison)


def print_table(doc: dict[str, Any], path: Path = RESULTS) -> None:
    print(
        f"tagpin monthly cost at the defaults ({doc['defaults']['poll_schedule']} poll, "
        f"{doc['defaults']['reconcile_schedule']} reconcile), us-east-1 list prices of {doc['price_date']}"
    )
    print(f"{'':<34}" + "".join(f"{'N=' + format(r['n'], ','):>14}" for r in doc["measured"]))

    def line(label: str, values: list[Any], fmt: str = "{:>14}") -> None:
        print(f"{label:<34}" + "".join(fmt.format(v) for v in values))

    rows, ests = doc["measured"], doc["estimate"]
    line(
        "steady poll: wall ms (against moto)",
        [f"{statistics.median(r['steady_poll']['duration_ms']):.0f}" for r in rows],
    )
    line(
        "steady poll: own CPU ms",
        [f"{statistics.median(r['steady_poll'].get('cpu_ms') or [0]):.0f}" for r in rows],
    )
    line(
        "steady poll: billed ms (modelled)",
        [f"{billed_ms(r['steady_poll'], doc['defaults']['memory_mb']['poller']) or 0:.0f}" for r in rows],
    )
    line("steady poll: AWS calls", [sum(r["steady_poll"]["aws_calls"].values()) for r in rows])
    line(
        "steady poll: RRU / WRU",
        [f"{r['steady_poll']['dynamodb_rru']:.0f}/{r['steady_poll']['dynamodb_wru']:.0f}" for r in rows],
    )
    line(
        "steady poll: registry requests", [sum(r["steady_poll"]["registry_requests"].values()) for r in rows]
    )
    line("consumer, one change: ms", [f"{r['consumer_one_change']['duration_ms'][0]:.0f}" for r in rows])
    line(
        "consumer, one change: AWS calls", [sum(r["consumer_one_change"]["aws_calls"].values()) for r in rows]
    )
    line("webhook, one change: AWS calls", [sum(r["webhook_one_change"]["aws_calls"].values()) for r in rows])

    def reconcile(value: Callable[[dict[str, Any]], str]) -> list[str]:
        """A steady reconcile's figure per size ("extrap." where none was measured)."""
        return [value(r["steady_reconcile"]) if "steady_reconcile" in r else "extrap." for r in rows]

    reconciler_mb = doc["defaults"]["memory_mb"]["reconciler"]
    line("steady reconcile: wall ms", reconcile(lambda m: f"{m['duration_ms'][0]:.0f}"))
    line(
        "steady reconcile: own CPU ms",
        reconcile(lambda m: f"{statistics.median(m.get('cpu_ms') or [0]):.0f}"),
    )
    line("steady reconcile: billed ms (mod.)", reconcile(lambda m: f"{billed_ms(m, reconciler_mb) or 0:.0f}"))
    line(
        "steady reconcile: RRU / WRU",
        reconcile(lambda m: f"{m['dynamodb_rru']:.0f}/{m['dynamodb_wru']:.0f}"),
    )
    print()
    # Columns for the sizes not measured (10,000 when not run, 100,000), MODELLED from the largest
    # measured size: every part but the fixed one scaled linearly in N (what the measured sizes
    # show for the poll, the reconcile and the changes).
    largest = max(ests, key=lambda e: e["n"])
    models: list[dict[str, Any]] = []
    for n in (m for m in MODEL_NS if m > largest["n"]):
        factor = n / largest["n"]
        by_part = {k: v * (1 if k == "fixed" else factor) for k, v in largest["by_part"].items()}
        models.append({"n": n, "by_part": by_part, "total_usd_month": sum(by_part.values())})
    columns = [*ests, *models]
    print(
        f"{'':<34}"
        + "".join(f"{'N=' + format(e['n'], ','):>14}" for e in ests)
        + "".join(f"{'N=' + format(m['n'], ',') + '*':>14}" for m in models)
    )
    parts = list(dict.fromkeys(p for e in ests for p in e["by_part"]))
    for part in parts:
        line(f"$/month {part}", [f"{e['by_part'].get(part, 0):.2f}" for e in columns])
    fixed = sorted({k for e in ests for k in e["lines"] if k.startswith("fixed: ")})
    for key in fixed:
        line(f"  {key.removeprefix('fixed: ')[:32]}", [f"{e['lines'].get(key, 0):.2f}" for e in ests])
    line("$/month TOTAL (list prices)", [f"{e['total_usd_month']:.2f}" for e in columns])
    line("$/month after always-free tier", [f"{e['after_free_tier_usd_month']:.2f}" for e in ests])
    line("$ per change (poll-detected)", [f"{e['per_change_usd']:.6f}" for e in ests])
    line(
        f"vs a ${VM_USD_MONTH:.0f}/month VM",
        [
            f"{VM_USD_MONTH / t:.1f}x cheaper"
            if (t := e["total_usd_month"]) <= VM_USD_MONTH
            else f"{t / VM_USD_MONTH:.1f}x dearer"
            for e in columns
        ],
    )
    print(f"* modelled, not measured: N={largest['n']:,}'s parts scaled linearly in N, the fixed part kept")
    for r in rows:
        if "reconcile_basis_n" in r and "steady_reconcile" not in r:
            print(
                f"N={r['n']:,}'s reconcile (extrap.) scaled linearly from N={r['reconcile_basis_n']:,}'s "
                f"steady reconcile, {r.get('reconcile_basis_from', SAME_RUN)}"
            )
    print(f"written to {_shown(path)}")
