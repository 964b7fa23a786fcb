"""The generated sentences of docs/console.md (the first page of targets), docs/gitops.md (one push
through 50 repositories), docs/policies.md (listing 10,000 tags) and docs/build.md (import times
and package sizes), from bench/results/*.json
(``bench/figures.py``): figures these pages had typed by hand from runs of older code."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from bench.figures_docs import Doc, Results, _load, _need
from bench.figures_readme import listings


def console_targets(results: Results) -> str:
    doc = _need(results, "console")
    page = doc["shapes"]["10000x1"]["pages"]["targets"]
    return (
        f"With 10,000 targets in the state table the first page of targets renders in "
        f"{page['in_process_ms']:.0f} ms at the handler, median of {doc['repeats']} ({page['rows']} rows, "
        f"{page['bytes'] / 1000:.0f} KB, {page['dynamodb_calls']:.0f} DynamoDB calls: "
        f"{', '.join(page['dynamodb_operations'])}; `make bench-console`, {_load(doc)}; "
        "see *Performance* below)."
    )


def gitops_run(results: Results) -> str:
    doc = _need(results, "gitops")
    rounds = "; ".join(f"{r['round']}: p50 {r['p50_s']} s, max {r['max_s']} s" for r in doc["rounds"])
    commits = sorted({c for r in doc["rounds"] for c in r["commits_per_repository"]})
    first = doc["rounds"][0]
    commit_s = statistics.median(
        span for _start, span in first["functions"]["writeback"][: doc["repositories"]]
    )
    size = doc["size"]
    runs = size["cold_start_ms_runs"]
    return (
        f"Measured (`make bench-gitops`, bench/results/gitops.json, {_load(doc)}): commits per repository "
        f"per push {commits}; {rounds}. A commit's write-back invocation takes {commit_s:.2f} s (the median "
        f"of the first {doc['repositories']} invocations of the first push). The Git layer is "
        f"{size['git_layer_bytes'] / 1e6:.1f} MB (dulwich {size['dulwich_bytes'] / 1e6:.1f} MB); the "
        f"write-back function's cold start (its handler imported and its writer built, on this host) "
        f"{size['cold_start_ms_median_of_5']:.0f} ms, median of {len(runs)} "
        f"({min(runs):.0f} to {max(runs):.0f} ms)."
    )


def tags_listing(results: Results) -> str:
    doc = _need(results, "tags")

    def listed(r: Doc) -> str:
        many = "request" if r["requests"] == 1 else "requests"
        return f"{r['requests']} {many}, {r['warm_median_ms']:.0f} ms warm"

    one, link, cap = listings(doc)
    return (
        f"`make bench-tags` (listing {doc['tags']:,} tags on the local registry, {_load(doc)}): one page "
        f"(distribution ignores `n`) {listed(one)}, {one['result_mb']:.1f} MB of tags; "
        f"pages of 1,000 through `Link` "
        f"{listed(link)}; pages capped at 100, {listed(cap)}."
    )


def coldstart_build(results: Results) -> str:
    """docs/build.md's table of import times and package sizes (it had figures typed from a run of
    code long changed: the registry client then on httpx)."""
    doc = _need(results, "coldstart")
    functions, references = doc["functions"], doc["references"]

    def times(entry: Doc, key: str) -> str:
        got = entry.get(key)
        if not got:
            return "-"
        return f"{got['import_best_s'] * 1000:.0f} / {got['import_median_s'] * 1000:.0f} ms"

    rows = [
        ("poller `app`", functions["PollerFunction"]),
        ("webhook `app`", functions["WebhookFunction"]),
        (
            "consumer `app` (kubernetes imported by its first change, not at module import)",
            functions["ConsumerFunction"],
        ),
        ("console `app`", functions["ConsoleFunction"]),
        (
            "reference: the common layer's libraries (powertools, pydantic, boto3...)",
            references["ref:common-libs"],
        ),
        (
            "reference: kubernetes sync client + `AppsV1Api(ApiClient(Configuration()))`",
            references["ref:k8s-client"],
        ),
        ("reference: all the consumer's libraries", references["ref:consumer-libs"]),
    ]
    first = functions["ConsumerFunction"].get("first_change")
    lines = [
        f"Measured by `make bench-coldstart` ({_load(doc)}; best / median of {doc['runs']} fresh processes):",
        "",
        "| import | with pycs | without pycs |",
        "|---|---|---|",
        *(f"| {name} | {times(entry, 'with_pyc')} | {times(entry, 'without_pyc')} |" for name, entry in rows),
    ]
    if first:
        lines.append(
            f"| the consumer's `app` and the Kubernetes client its first change imports | "
            f"{first['import_best_s'] * 1000:.0f} / {first['import_median_s'] * 1000:.0f} ms | - |"
        )
    sizes = "; ".join(
        f"{name.removesuffix('Function').lower()} {entry['unzipped_mb']:.1f} / "
        f"{entry['unzipped_no_pyc_mb']:.1f} MB unzipped, {entry['zipped_mb']:.1f} MB zipped"
        for name, entry in functions.items()
    )
    lines += ["", f"With their layers (with pycs / sources only; Lambda's limit 250 MB unzipped): {sizes}."]
    return "\n".join(lines)


PROSE_BLOCKS: dict[str, dict[str, Callable[[Results], str]]] = {
    "docs/console.md": {"console-targets": console_targets},
    "docs/gitops.md": {"gitops-run": gitops_run},
    "docs/policies.md": {"tags-listing": tags_listing},
    "docs/build.md": {"coldstart-build": coldstart_build},
}
