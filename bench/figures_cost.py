"""The generated blocks of docs/cost.md (``bench/figures.py``): each a function of the results
(``bench/results/cost.json``, ``fanout.json``, and ``cost_history.json`` for the figures of earlier
code that the page compares with)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

Doc = dict[str, Any]
Results = Callable[[str], Doc | None]

VM_USD_MONTH = 6.0  # a small VM running an in-cluster peer (the comparison issue 13 asked for)
MODEL_N = 100_000


def _need(results: Results, name: str) -> Doc:
    doc = results(name)
    if doc is None:
        raise SystemExit(f"bench/results/{name}.json is missing: run its bench (bench/catalog.py)")
    return doc


def _est(doc: Doc) -> dict[int, Doc]:
    return {e["n"]: e for e in doc["estimate"]}


def _measured(doc: Doc) -> dict[int, Doc]:
    return {m["n"]: m for m in doc["measured"]}


def _vm(total: float) -> str:
    return f"{VM_USD_MONTH / total:.1f}x cheaper than a ${VM_USD_MONTH:.0f}/month VM"


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _ms(value: float) -> str:
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


GOALS = {1000: 1.00, 10_000: 10.0}  # $/month at N tags (issue 13), list prices, no free tier


def _goal(total: float, goal: float) -> str:
    return f"≤ {goal:.2f}: {'met' if round(total, 2) <= goal else '**missed**'}"


def run_line(results: Results) -> str:
    doc = _need(results, "cost")
    sizes = " / ".join(f"{m['n']:,}" for m in doc["measured"])
    return f"Its last run (sizes {sizes}) took {doc.get('seconds', 0) / 60:.0f} minutes."


def summary(results: Results) -> str:
    doc, history = _need(results, "cost"), _need(results, "cost_history")
    est, meas = _est(doc), _measured(doc)
    sizes = sorted(est)
    largest = est[sizes[-1]]
    factor = MODEL_N / largest["n"]
    model = sum(v * (1 if k == "fixed" else factor) for k, v in largest["by_part"].items())
    cols = history["columns"]
    old = history["rows"]
    lines = [
        "| $/month | " + " | ".join(cols) + " | **now** | goal |",
        "|---|" + "---|" * (len(cols) + 2),
    ]
    fixed = est[sizes[0]]["by_part"]["fixed"]
    alarm = est[sizes[0]]["lines"].get("fixed: CloudWatch alarms", 0)
    idle = est[sizes[0]]["lines"].get("fixed: SQS event source idle polling (assumed)", 0)
    queues = doc["defaults"].get("consumed_queues", 1)
    lines.append(
        f"| fixed, nothing followed | {' | '.join(old['fixed'])} | **{fixed:.2f}** (alarms {alarm:.2f}, "
        f"the event source's idle polling of the {queues} queue{'s' if queues != 1 else ''} it reads "
        f"{idle:.2f}) | {_goal(fixed, 0.50)} |"
    )
    for n in sizes:
        e = est[n]
        note = _vm(e["total_usd_month"]) if e["total_usd_month"] <= VM_USD_MONTH else "dearer than the VM"
        if e.get("reconcile_extrapolated"):
            basis = meas[n].get("reconcile_basis_n", "a smaller size")
            note += f"; the reconcile scaled from {basis:,}" if isinstance(basis, int) else ""
        lines.append(
            f"| {n:,} tags | {' | '.join(old.get(str(n), ['', '']))} | "
            f"**{e['total_usd_month']:.2f}** ({note}) "
            f"| {_goal(e['total_usd_month'], GOALS[n]) if n in GOALS else ''} |"
        )
    lines.append(
        f"| {MODEL_N:,} tags | {' | '.join(old[str(MODEL_N)])} | **{model:.2f} modelled** ({largest['n']:,} "
        "scaled linearly) | |"
    )
    calls = " / ".join(str(sum(meas[n]["consumer_one_change"]["aws_calls"].values())) for n in sizes)
    cpu = " / ".join(f"{_median(meas[n]['consumer_one_change']['cpu_ms']):.0f}" for n in sizes)
    consumer = f"{calls} AWS calls, {cpu} ms of its own CPU at {' / '.join(f'{n:,}' for n in sizes)} tags"
    lines.append(f"| one change: consumer | {' | '.join(old['consumer'])} | **{consumer}** | constant in N |")
    return "\n".join(lines)


def where(results: Results) -> str:
    doc = _need(results, "cost")
    est = _est(doc)
    out = []
    for n in sorted(est)[-2:]:
        e = est[n]
        parts = ", ".join(f"{k} ${v:.2f}" for k, v in sorted(e["by_part"].items(), key=lambda kv: -kv[1]))
        usage = e.get("usage", {})
        standard = usage.get("sqs_requests_standard", 0.0)
        fifo = usage.get("sqs_requests", 0.0) - standard
        out.append(
            f"At {n:,} tags (${e['total_usd_month']:.2f}): {parts}; SQS requests a month, each priced by "
            f"its queue's type: {fifo:,.0f} FIFO, {standard:,.0f} standard."
        )
    sizes = sorted(est)
    free = " / ".join(f"${est[n]['after_free_tier_usd_month']:.2f}" for n in sizes)
    out.append(
        f"With AWS's always-free allowances subtracted (`bench/cost/prices.py` FREE_TIER; only if "
        f"nothing else in the account uses them): {free} at {' / '.join(f'{n:,}' for n in sizes)} tags."
    )
    return "Where the money goes. " + " ".join(out)


def measured(results: Results) -> str:
    from bench.cost.model import billed_ms

    doc = _need(results, "cost")
    meas = _measured(doc)
    sizes = sorted(meas)
    memory = doc["defaults"]["memory_mb"]

    def cells(f: Callable[[Doc], str]) -> str:
        return " | ".join(f(meas[n]) for n in sizes)

    def poll_cpu(m: Doc) -> str:
        p = m["steady_poll"]
        return f"{_ms(_median(p['cpu_ms']))} / {_ms(billed_ms(p, memory['poller']) or 0)}"

    def rec(f: Callable[[Doc], str]) -> Callable[[Doc], str]:
        return lambda m: f(m["steady_reconcile"]) if "steady_reconcile" in m else "scaled"

    lines = [
        "| | " + " | ".join(f"N = {n:,}" for n in sizes) + " |",
        "|---|" + "---|" * len(sizes),
        "| steady poll: own CPU / billed (modelled) | " + cells(poll_cpu) + " |",
        "| steady poll: AWS calls, RRU / WRU | "
        + cells(
            lambda m: (
                f"{sum(m['steady_poll']['aws_calls'].values())}, {m['steady_poll']['dynamodb_rru']:.0f} / "
                f"{m['steady_poll']['dynamodb_wru']:.0f}"
            )
        )
        + " |",
        "| steady poll: registry requests | "
        + cells(lambda m: ", ".join(f"{v:,} {k}" for k, v in m["steady_poll"]["registry_requests"].items()))
        + " |",
        "| steady reconcile: own CPU / billed (modelled) | "
        + cells(
            rec(lambda r: f"{_ms(_median(r['cpu_ms']))} / {_ms(billed_ms(r, memory['reconciler']) or 0)}")
        )
        + " |",
        "| steady reconcile: RRU / WRU | "
        + cells(rec(lambda r: f"{r['dynamodb_rru']:.0f} / {r['dynamodb_wru']:.0f}"))
        + " |",
        "| one change, consumer: own CPU, AWS calls | "
        + cells(
            lambda m: (
                f"{_median(m['consumer_one_change']['cpu_ms']):.0f} ms, "
                f"{sum(m['consumer_one_change']['aws_calls'].values())}"
            )
        )
        + " |",
        "| its verification, consumer (early receive + due) | "
        + cells(lambda m: " + ".join(f"{c:.0f}" for c in m["verification_one_change"]["cpu_ms"]) + " ms CPU")
        + " |",
        "| one notification, webhook: AWS calls | "
        + cells(lambda m: str(sum(m["webhook_one_change"]["aws_calls"].values())))
        + " |",
    ]
    walls = ", ".join(_ms(meas[n]["consumer_one_change"]["duration_ms"][0]) for n in sizes)
    lines += [
        "",
        f"The consumer's *wall* time against moto ({walls} at {' / '.join(f'{n:,}' for n in sizes)} tags) is "
        "moto's: it answers a DynamoDB `Query` by scanning the partition, in the same process. Its own CPU "
        "and its calls are what Lambda bills.",
    ]
    return "\n".join(lines)


def history(results: Results) -> str:
    doc = _need(results, "cost_history")
    lines = ["| step | effect |", "|---|---|"]
    lines += [f"| {step} | {effect} |" for step, effect in doc["steps"]]
    return "\n".join(lines)


def fanout(results: Results) -> str:
    doc = _need(results, "fanout")
    lines = [
        f"Fan-out, `make bench-fanout` at {doc['tags']:,} tags (the parts run one after the "
        f"other here; on AWS "
        "side by side, so a round lasts as long as its slowest part):",
        "",
        f"| parts | slowest part, wall (own CPU) | peak Python memory | {MODEL_N:,} tags "
        f"modelled: from wall / "
        "from own CPU at 256 MB + registry round trips |",
        "|---|---|---|---|",
    ]
    for r in doc["rows"]:
        under = r["model_100k_under_5_min_from_own_cpu"] and r["model_100k_under_5_min"]
        verdict = "under 5 min" if under else "over 5 min"
        lines.append(
            f"| {r['parts']} | {r['slowest_part_s']:.1f} s ({r['slowest_part_own_cpu_s']:.1f} s) | "
            f"{r['peak_python_mb_per_part']:.1f} MB | {r['model_100k_round_s']:,.0f} s / "
            f"{r['model_100k_round_s_from_own_cpu']:,.0f} s ({verdict}) |"
        )
    lines += [
        "",
        f"Modelled, not measured at {MODEL_N:,} ({doc['tags']:,} is what moto on this machine sets up in "
        f"reasonable time: {doc['setup_s']:.0f} s); the registries' rate limits on the internet are "
        "not in it.",
    ]
    return "\n".join(lines)


def lower(results: Results) -> str:
    """What a schedule change saves, from the largest size's parts (linear in the runs per month)."""
    doc = _need(results, "cost")
    est = _est(doc)
    n = max(est)
    parts = est[n]["by_part"]
    poll, reconcile = parts.get("poll (steady)", 0.0), parts.get("reconcile (steady)", 0.0)
    poll_min = int(doc["defaults"]["poll_schedule"].split("(")[1].split()[0])
    rec_min = int(doc["defaults"]["reconcile_schedule"].split("(")[1].split()[0])
    return "\n".join(
        [
            f"| change | effect at {n:,} tags |",
            "|---|---|",
            f"| `ReconcileSchedule: rate(1 hour)` | reconcile ${reconcile:.2f} → "
            f"${reconcile * rec_min / 60:.2f}; "
            "missed events and manual edits healed within the hour |",
            f"| `PollSchedule: rate(15 minutes)` | poll ${poll:.2f} → "
            f"${poll * poll_min / 15:.2f}; a change without "
            "a notification seen within 15 minutes |",
            "| registry notifications (webhooks, ECR events) + `PollSchedule: rate(1 hour)` | poll → "
            f"${poll * poll_min / 60:.2f}; ${est[n]['per_webhook_detection_usd']:.5f} per notification |",
        ]
    )


def assumptions(results: Results) -> str:
    doc = _need(results, "cost")
    a, d, prices = doc["assumptions"], doc["defaults"], doc["prices_usd"]
    est = _est(doc)
    extrapolated = [n for n, e in sorted(est.items()) if e.get("reconcile_extrapolated")]
    basis = max((n for n, e in est.items() if not e.get("reconcile_extrapolated")), default=0)
    memory = ", ".join(f"{k} {v} MB" for k, v in d["memory_mb"].items())
    rows = [
        (
            "tag changes",
            f"{a['changes_per_1000_tags_per_day']:g} a day per 1,000 tags, each applied to one "
            "target and verified once",
            "`--changes-per-1000-per-day`",
        ),
        (
            "targets",
            f"{a['targets_per_tag']} per tag, label-discovered, {a['clusters']} cluster(s)",
            "`--clusters`",
        ),
        ("secrets", f"the webhook's and one kubeconfig, {a['secret_store']}", "`--secret-store`"),
        (
            "idle SQS polling by Lambda's event source",
            f"{a['sqs_event_source_idle_receives_per_minute_per_queue']:g} "
            "`ReceiveMessage` a minute per queue it reads (5 pollers, 20 s long polls; what users of the "
            'integration report as "empty receives"; not measurable here)',
            "`--esm-receives-per-minute`",
        ),
        ("Lambda duration", a["lambda_duration"] + " (`bench/cost/model.py`)", ""),
        (
            "architecture",
            f"{d['architecture']} (${prices['lambda_gb_second_arm64']} per GB-s), {memory}",
            "`template.yaml`",
        ),
        (
            "alarms, queues, tracing",
            f"{d['alarms']} alarm(s), {d['consumed_queues']} queue(s) consumed, tracing "
            f"{d['tracing']}: as created at the template's parameter defaults",
            "`bench/cost/defaults.py`",
        ),
        ("month", f"{a['hours_per_month']} hours", ""),
        (
            "prices",
            f"us-east-1 list prices of {doc['price_date']}, no free tier in the totals",
            "`bench/cost/prices.py`",
        ),
    ]
    if extrapolated:
        rows.append(
            (
                ", ".join(f"{n:,}" for n in extrapolated) + " tags",
                f"poll, change, webhook measured; the reconcile scaled linearly from {basis:,}",
                "`--reconcile-max`",
            )
        )
    rows.append((f"{MODEL_N:,} tags", f"every part but the fixed one scaled linearly from {max(est):,}", ""))
    return "\n".join(
        ["| assumption | value | flag |", "|---|---|---|", *(f"| {k} | {v} | {f} |" for k, v, f in rows)]
    )


def config(results: Results) -> str:
    doc = _need(results, "cost")
    m = min(doc["measured"], key=lambda m: m["n"])
    c = m["config"]
    return (
        f"Listing {m['n']:,} targets explicitly took {c['explicit_config_bytes'] / 1024:.1f} KB (about "
        f"{c['explicit_config_bytes'] / m['n']:.0f} bytes each), "
        + ("within" if c["explicit_fits_advanced_8kb"] else "beyond even")
        + f" the advanced tier; by labels the configuration was {c['labels_config_bytes']} bytes."
    )


COST_BLOCKS: dict[str, Callable[[Results], str]] = {
    "cost-assumptions": assumptions,
    "cost-config": config,
    "cost-run": run_line,
    "cost-summary": summary,
    "cost-where": where,
    "cost-measured": measured,
    "cost-history": history,
    "cost-fanout": fanout,
    "cost-lower": lower,
}
