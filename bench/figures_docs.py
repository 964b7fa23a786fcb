"""The generated blocks of docs/console.md and docs/registries.md (``bench/figures.py``): each a
function of the results. docs/console.md: the pages before and after (``console-before.json``,
``console.json``), the run with moto's Query as it is (``console-moto-as-is.json``) and the
console's cold start beside the webhook's (``coldstart.json``). docs/registries.md: the polls beside
frozen and slow registries, with the client of today and the two it replaced
(``hanging_registry.json``, ``-before.json``, ``-batchcut.json``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Doc = dict[str, Any]
Results = Callable[[str], Doc | None]

SHAPES = ("10000x1", "2000x5", "100x100")
TIMES, DASH = "\u00d7", "\u2013"  # as the pages write them
PAGES = {
    "overview": "overview",
    "images": "images",
    "images-2": "images, page 2",
    "targets": "targets",
    "targets-2": "targets, page 2",
    "holds": "holds (5 held)",
    "image": "one image",
    "target": "one target (`id` and `image`)",
    "target-by-id": "one target by its id only",
    "unknown-target": "an unknown target (404)",
    "dead-letters": "dead letters",
}


def _need(results: Results, name: str) -> Doc:
    doc = results(name)
    if doc is None:
        raise SystemExit(f"bench/results/{name}.json is missing: run its bench (bench/catalog.py)")
    return doc


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _shape(name: str) -> str:
    tags, per = name.split("x")
    return f"{int(tags):,} {TIMES} {per}"


def _load(doc: Doc) -> str:
    """How loaded the run was, from its stamp (``bench/runinfo.py``) or its own record."""
    run = doc.get("run")
    if run:
        load = f"{run['load_start']:.1f}-{run['load_end']:.1f}"
        return f"{run['date'][:10]}, {run['commit'][:7]}, load average {load}"
    if "load_average_before" in doc:
        before, after = doc["load_average_before"][0], doc["load_average_after"][0]
        return f"load average {before:.1f} before, {after:.1f} after"
    return "its load was not recorded"


def console_pages(results: Results) -> str:
    before, after = _need(results, "console-before"), _need(results, "console")
    lines = [
        f"Before (the same bench on the code before these changes, `bench/results/console-before.json`, "
        f"{_load(before)}) → after (`bench/results/console.json`, {_load(after)}, slowest page "
        f"{after['slowest_ms']:.0f} ms), in ms in process / over HTTP (DynamoDB calls), on a 2-core "
        "machine shared with other work:",
        "",
        "| page | " + " | ".join(_shape(s) for s in SHAPES) + " |",
        "|---|" + "---|" * len(SHAPES),
    ]
    for page, label in PAGES.items():
        cells = []
        for shape in SHAPES:
            old = before["shapes"][shape]["pages"].get(page)
            new = after["shapes"][shape]["pages"][page]
            was = (
                f"{_n(old['in_process_ms'])} / {_n(old['http_ms'])} ({old['dynamodb_calls']:.0f})"
                if old
                else f"no {label.split(', ')[-1]}"
            )
            now = f"**{_n(new['in_process_ms'])} / {_n(new['http_ms'])}** ({new['dynamodb_calls']:.0f})"
            cells.append(f"{was} → {now}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def console_moto(results: Results) -> str:
    doc = _need(results, "console-moto-as-is")
    (shape,) = doc["shapes"]
    pages = doc["shapes"][shape]["pages"]
    times = {k: max(p["in_process_ms"], p["http_ms"]) for k, p in pages.items()}
    fastest = min(min(p["in_process_ms"], p["http_ms"]) for p in pages.values())
    slowest = max(times, key=lambda k: times[k])
    return (
        f"(`bench/results/console-moto-as-is.json`, {_shape(shape)}, {_load(doc)}): the pages take "
        f"{_n(fastest)}{DASH}{_n(times[slowest])} ms (the slowest the {PAGES[slowest].split(' (')[0]} page), "
        "each Query paying for a sort of the whole table."
    )


def console_coldstart(results: Results) -> str:
    doc = _need(results, "coldstart")
    console, webhook = doc["functions"]["ConsoleFunction"], doc["functions"]["WebhookFunction"]
    c, w = console["with_pyc"], webhook["with_pyc"]
    clean = not c["kubernetes_in_sys_modules"]
    return (
        f"Cold start (`make bench-coldstart`, the handler's import with bytecode, x86_64 build of the same "
        f"template, {_load(doc)}): {_n(c['import_best_s'] * 1000)} ms best, "
        f"{_n(c['import_median_s'] * 1000)} ms median, against {_n(w['import_best_s'] * 1000)} / "
        f"{_n(w['import_median_s'] * 1000)} ms for the webhook in the same run; the handler imports no "
        f"Jinja2{' and no `kubernetes`' if clean else ''} (the pages are built on the first request). "
        f"{console['unzipped_mb']:.0f} MB unzipped with the common layer, Jinja2 and MarkupSafe in the "
        "function's own package."
    )


def _seconds(runs: list[Doc]) -> str:
    values = [f"{r['seconds']:.2f}" for r in sorted(runs, key=lambda r: r["run"])]
    return ", ".join(values[:-1]) + " and " + values[-1] + " s"


def hanging_runs(results: Results) -> str:
    doc, before, cut = (
        _need(results, "hanging_registry"),
        _need(results, "hanging_registry-before"),
        _need(results, "hanging_registry-batchcut"),
    )

    def runs(d: Doc, scenario: str, tags: int | None = None) -> list[Doc]:
        return [
            r
            for r in d["runs"]
            if r.get("scenario", "frozen") == scenario
            and (tags is None or r.get("problem_tags", r.get("hanging")) == tags)
        ]

    unbounded = [r for r in before["runs"] if r.get("hanging") == 1]
    fill, slow = runs(doc, "frozen-fill"), runs(doc, "slow")
    healthy_first = fill[0]["healthy_changed"] if fill else 0
    cut_fill = runs(cut, "frozen-fill")
    cut_slow = runs(cut, "slow")
    return "\n".join(
        [
            f"- Measured with `make bench-hanging` (20 healthy tags, {len(runs(doc, 'frozen', 1))} polls in "
            f"a row with the client's defaults, on {doc['cpus']} cores shared with other work: "
            f"{_load(doc)}, in `bench/results/hanging_registry.json`), every poll found the healthy tag "
            "pushed before it:",
            f"  - 1 frozen tag: {_seconds(runs(doc, 'frozen', 1))}; 10 frozen tags: "
            f"{_seconds(runs(doc, 'frozen', 10))}.",
            f"    With no bound per registry each poll took {_seconds(unbounded)}",
            "    (`bench/results/hanging_registry-before.json`);",
            f"  - two frozen registries with {fill[0]['problem_tags']} tags each (more than the 64 global "
            f"slots), asked before the healthy one: {_seconds(fill)}, all {healthy_first} healthy tags "
            "polled in the first;",
            f"  - a registry answering every request after {doc['slow_seconds']:.0f} s (past the deadline, "
            f"within the timeout): its {slow[0]['problem_tags']} tags resolved in every poll "
            f"({_seconds(slow)}).",
            "",
            "  The cut it replaces (once nothing in the whole batch had ended for 5 s, every unanswered "
            "tag got",
            "  the error and each of their registries was skipped for 60 s) took "
            f"{runs(cut, 'frozen', 1)[0]['seconds']:.1f} s for the frozen tag, but",
            "  recorded every healthy tag of the two-frozen case as an error in "
            + (
                f"all {len(cut_fill)} polls (never asked, then"
                if not any(r["healthy_changed"] for r in cut_fill)
                else f"{sum(not r['healthy_changed'] for r in cut_fill)} of {len(cut_fill)} polls "
                "(never asked, then"
            ),
            f"  skipped) and cut the {cut['slow_seconds']:.0f} s registry, whose "
            f"{cut_slow[0]['problem_tags']} tags were errors in all "
            f"{sum(1 for r in cut_slow if r['errors'] >= r['problem_tags'])}",
            f"  (`bench/results/hanging_registry-batchcut.json`, {_load(cut)}).",
        ]
    )


DOC_BLOCKS: dict[str, dict[str, Callable[[Results], str]]] = {
    "docs/console.md": {
        "console-pages": console_pages,
        "console-moto": console_moto,
        "console-coldstart": console_coldstart,
    },
    "docs/registries.md": {"hanging-runs": hanging_runs},
}
