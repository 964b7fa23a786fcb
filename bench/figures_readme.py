"""The rows of the README's performance table (``bench/figures.py``): what each measures, the
bench whose results give it and how its figure is written from them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Doc = dict[str, Any]


@dataclass(frozen=True)
class Row:
    what: str
    bench: str
    render: Callable[[Doc], str]


def n(value: float) -> str:
    return f"{value:,.0f}"


def webhook(doc: Doc) -> str:
    rows = {r["events"]: r for r in doc["rows"]}
    ok, over = rows[1000], min((r for r in doc["rows"] if 413 in r["status"]), key=lambda r: r["events"])
    return (
        f"{ok['median_ms']:.0f} ms median ({ok['body_kb']:.0f} KB), "
        f"{ok['dynamodb_calls_per_delivery']:.0f} DynamoDB "
        f"calls; {over['events']:,} events: 413 in {over['median_ms']:.0f} ms"
    )


def concurrency(doc: Doc) -> str:
    parts = []
    for r in doc["rows"]:
        p99 = f", p99 {r['p99_s']} s" if "p99_s" in r else ""
        isolation = f" as {r['isolation']}" if "isolation" in r else ""
        if r.get("moto_nice"):  # moto's process first on the cores (bench/concurrency: moto-first)
            isolation += f", moto's process at nice {r['moto_nice']} (AWS's services do not share"
            isolation += " the functions' cores)"
        parts.append(
            f"{r['containers']} container(s) per function{isolation}: p50 {r['p50_s']} s, "
            f"p90 {r['p90_s']} s{p99}, max {r['max_s']} s"
        )
    once = sorted({p for r in doc["rows"] for p in r["patches_per_workload"]})
    conflicts = sum(r.get("patch_conflicts", 0) for r in doc["rows"])
    return (
        f"push → patch of {doc['rows'][0]['tags']} tags; "
        + "; ".join(parts)
        + f"; patches applied per workload {once}"
        + (
            f" ({conflicts} PATCHes answered 409 and sent again)"
            if "patch_conflicts" in doc["rows"][0]
            else ""
        )
    )


def gitops(doc: Doc) -> str:
    rounds = "; ".join(f"{r['round']}: p50 {r['p50_s']} s, max {r['max_s']} s" for r in doc["rounds"])
    commits = sorted({c for r in doc["rounds"] for c in r["commits_per_repository"]})
    size = doc.get("size")
    cold = (
        f"; Git layer {size['git_layer_bytes'] / 1e6:.1f} MB, write-back cold start "
        f"{size['cold_start_ms_median_of_5']:.0f} ms"
        if size
        else ""
    )
    return (
        f"push → commit per repository, {doc['workloads']} workloads in {doc['repositories']} "
        f"repositories: {rounds}; commits per repository per push {commits} (Argo CD Image "
        f"Updater: about 13 minutes a cycle at 500 applications){cold}"
    )


def latency(doc: Doc) -> str:
    first, warm = doc["first"], doc["warm"]
    where = ", ".join(f"{k} {v:.0f} ms" for k, v in first["where_ms"].items() if round(v))
    over = doc.get("first_over_warm_spread_ms", {}).get("push_to_patch_ms")
    starts = (
        f" (median of {first['starts']} starts; over a warm push of its start {over['median']:+.0f} ms, "
        f"{over['min']:+.0f} to {over['max']:+.0f})"
        if over
        else ""
    )
    return (
        f"first push after a start {first['push_to_patch_ms']:.0f} ms{starts} ({where}); warm: median "
        f"{warm['median_ms']:.0f} ms, p90 {warm['p90_ms']:.0f} ms of {warm['pushes']} pushes"
    )


def _poll(doc: Doc, scenario: str, size: int) -> Doc:
    return next(r for r in doc["results"] if r["scenario"] == scenario and r["n"] == size)


def poll_steady(size: int) -> Callable[[Doc], str]:
    def render(doc: Doc) -> str:
        r = _poll(doc, "steady", size)
        runs = r.get("runs_tags_per_s", [])
        of = (
            f" (the median of {len(runs)} polls: {', '.join(n(x) for x in runs)} tags/s)"
            if len(runs) > 1
            else ""
        )
        return (
            f"{n(r['tags_per_s'])} tags/s, {r['seconds']:.2f} s{of}, {r['peak_rss_mb']:.0f} MB peak; "
            f"{r['ceiling_ratio']:.3f}x the registry's ceiling ({n(r['ceiling_per_s'])}/s, wrk), "
            f"{r['skopeo_ratio']:.1f}x a skopeo loop ({r['skopeo_per_s']:.0f}/s)"
            + (
                f" (the ceiling itself: {r['ceiling_skopeo_ratio']:.0f}x)"
                if "ceiling_skopeo_ratio" in r
                else ""
            )
        )

    return render


def poll_other(scenario: str) -> Callable[[Doc], str]:
    def render(doc: Doc) -> str:
        rows = sorted((r for r in doc["results"] if r["scenario"] == scenario), key=lambda r: r["n"])
        return "; ".join(
            f"{n(r['n'])} tags: {r['seconds']:.1f} s ({n(r['tags_per_s'])} tags/s), "
            f"{sum(r['dynamodb_calls'].values()):,} DynamoDB calls, {r['peak_rss_mb']:.0f} MB"
            for r in rows
        )

    return render


def poll_latency(doc: Doc) -> str:
    r = doc["latency_50ms"]
    return (
        f"{n(r['tags_per_s'])} tags/s (bound {n(r['bound_per_s'])}/s at "
        f"{r['per_registry_concurrency']} per registry)"
    )


def listings(doc: Doc) -> tuple[Doc, Doc, Doc]:
    """bench-tags' three listings: one page (the registry's own), ``Link`` pages of 1,000, pages
    capped at 100."""
    rows = {r["scenario"]: r for r in doc["rows"]}
    return rows["registry"], rows["link-1000"], rows["link-cap-100"]


def tags(doc: Doc) -> str:
    reg, link, cap = listings(doc)
    return (
        f"one page: {reg['requests']} request, {reg['warm_median_ms']:.0f} ms warm, "
        f"{reg['peak_python_mb']:.2f} MB "
        f"peak Python memory; Link pages of 1,000: {link['requests']} requests, "
        f"{link['warm_median_ms']:.0f} ms; "
        f"pages capped at 100: {cap['requests']} requests, {cap['warm_median_ms']:.0f} ms"
    )


# moto (before tagpin_local.moto_partitions) sorted the whole table on every Query: a figure
# measured without that sort says so, as it is not comparable with one measured with it
MOTO_PARTITIONED = " (moto's whole-table sort per Query set aside)"


def reconcile(doc: Doc) -> str:
    steady = [r for r in doc["runs"] if r["run"].startswith("steady")]
    median = sorted(steady, key=lambda r: r["seconds"])[len(steady) // 2]
    moto = MOTO_PARTITIONED if doc.get("moto", "as is").startswith("Query") else ""
    return (
        f"{median['seconds']:.1f} s a steady run (median of {len(steady)}), "
        f"{median['kubernetes_requests']} Kubernetes LISTs{moto}"
    )


def console(doc: Doc) -> str:
    pages = [(shape, name, row) for shape, r in doc["shapes"].items() for name, row in r["pages"].items()]
    slowest = max(max(row["in_process_ms"], row["http_ms"]) for _, _, row in pages)
    calls = max(row["dynamodb_calls"] for _, _, row in pages)
    moto = "" if doc["moto"].startswith("as is") else MOTO_PARTITIONED
    return (
        f"slowest page {slowest:.0f} ms median of {len(pages)} (page x shape), in process and over HTTP "
        f"on the local stack{moto}; at most {calls:.0f} DynamoDB calls a page"
    )


def coldstart(doc: Doc) -> str:
    f = doc["functions"]

    def ms(m: Doc) -> str:
        cpu = f" ({m['import_cpu_median_s'] * 1000:,.0f} ms CPU)" if "import_cpu_median_s" in m else ""
        return f"{m['import_median_s'] * 1000:,.0f} ms{cpu}"

    consumer = f["ConsumerFunction"]
    first = consumer.get("first_change", {})
    k8s = (
        f", {ms(first)} with the Kubernetes client its first change imports"
        if "import_median_s" in first
        else ""
    )
    clean = all(
        not f[k]["with_pyc"]["kubernetes_in_sys_modules"] for k in ("WebhookFunction", "PollerFunction")
    )
    return (
        f"webhook {ms(f['WebhookFunction']['with_pyc'])}, poller {ms(f['PollerFunction']['with_pyc'])}, "
        f"consumer {ms(consumer['with_pyc'])}{k8s}; the consumer's package {consumer['unzipped_mb']:.0f} MB "
        f"unzipped, {consumer['zipped_mb']:.0f} MB zipped"
        + (
            "; webhook and poller never load `kubernetes`"
            if clean
            else "; `kubernetes` loaded by webhook/poller!"
        )
    )


def cost(doc: Doc) -> str:
    est = {e["n"]: e for e in doc["estimate"]}
    sizes = sorted(est)
    totals = " / ".join(f"${est[s]['total_usd_month']:.2f}" for s in sizes)
    return (
        f"{totals} at {' / '.join(n(s) for s in sizes)} tags, list prices; fixed part "
        f"${est[sizes[0]]['by_part']['fixed']:.2f}; see [docs/cost.md](docs/cost.md)"
    )


README_ROWS: tuple[Row, ...] = (
    Row("steady poll, 10,000 tags", "poll", poll_steady(10_000)),
    Row("steady poll, 1,000 tags", "poll", poll_steady(1_000)),
    Row("the first poll after every tag moved", "poll", poll_other("moved")),
    Row("a poll settling tags not yet in the settled digests", "poll", poll_other("settling")),
    Row("poll with 50 ms registry latency, 1,000 tags", "poll", poll_latency),
    Row("one push → patch, local stack", "latency", latency),
    Row("50 tags pushed at once, local stack", "concurrency", concurrency),
    Row("one push moving 500 GitOps-owned workloads in 50 Git repositories, local stack", "gitops", gitops),
    Row("one webhook delivery of 1,000 unfollowed events", "webhook", webhook),
    Row("cold start (import of the handler, with bytecode)", "coldstart", coldstart),
    Row("listing a repository of 10,000 tags", "tags", tags),
    Row("reconcile, 1,000 workloads on 3 clusters", "reconcile", reconcile),
    Row(
        "every console page, 10,000 targets in the state table (10,000 tags x 1, 2,000 x 5, 100 x 100)",
        "console",
        console,
    ),
    Row("monthly cost", "cost", cost),
)
