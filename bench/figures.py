"""Every figure of the README's performance table, of docs/cost.md and of the measured parts of
docs/console.md and docs/registries.md, generated from bench/results/*.json; and whether each
result still measures the code as it is.

    python bench/figures.py            print the generated blocks and the results' freshness
    python bench/figures.py --write    rewrite the blocks in README.md and docs/*.md (make figures)
    python bench/figures.py --check    exit 1 when a block in the files differs from what the results
                                       give (make bench-check; .ci/run); list each stale result
    python bench/figures.py --check --strict   also exit 1 on a stale result (before resolving an
                                       issue that changed measured code)

A block sits between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->``; nothing between
the markers is written by hand. A result is stale when a commit after the one it measured touches a
path its bench covers (``bench/catalog.py``), when it was measured with uncommitted changes to
those paths, or when it records no commit at all. Each figure shows the load average of its run and
the machine's reference time (``bench/runinfo.reference_ms``), so that one measured on a busy or a
slower machine is visible as such.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.catalog import BENCHES, BY_NAME  # noqa: E402
from bench.figures_cost import COST_BLOCKS  # noqa: E402
from bench.figures_docs import DOC_BLOCKS as FIGURE_BLOCKS  # noqa: E402
from bench.figures_prose import PROSE_BLOCKS  # noqa: E402
from bench.figures_readme import README_ROWS  # noqa: E402

# each page's generated blocks: its measured parts (figures_docs) and its sentences (figures_prose)
DOC_BLOCKS = {
    file: {**FIGURE_BLOCKS.get(file, {}), **PROSE_BLOCKS.get(file, {})}
    for file in {*FIGURE_BLOCKS, *PROSE_BLOCKS}
}

RESULTS = ROOT / "bench" / "results"
FILES = {
    "README.md": ("performance",),
    "docs/cost.md": tuple(COST_BLOCKS),
    **{file: tuple(names) for file, names in DOC_BLOCKS.items()},
}


def result(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        return None
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def measured(doc: dict[str, Any] | None) -> str:
    """When and how loaded the run was: ``2026-11-26, load 0.4-0.6`` (or that it recorded nothing)."""
    run = (doc or {}).get("run")
    if not run:
        return "not recorded"
    speed = f", ref {run['reference_ms']:.0f} ms" if "reference_ms" in run else ""
    load = f"load {run['load_start']:.1f}-{run['load_end']:.1f}"
    return f"{run['date'][:10]}, {run['commit'][:7]}, {load}{speed}"


def performance_table() -> str:
    lines = [
        "| what | figure | measured (date, commit, load average, reference) | bench |",
        "|---|---|---|---|",
    ]
    for row in README_ROWS:
        doc = result(row.bench)
        try:
            figure = row.render(doc) if doc is not None else "no result yet"
        except (KeyError, StopIteration, TypeError, IndexError):
            figure = "its result is of an older bench (a figure it does not have): re-run it"
        lines.append(f"| {row.what} | {figure} | {measured(doc)} | `make {BY_NAME[row.bench].target}` |")
    return "\n".join(lines)


def blocks() -> dict[str, str]:
    found = {"performance": performance_table()}
    for name, render in COST_BLOCKS.items():
        found[name] = render(result)
    for renders in DOC_BLOCKS.values():
        for name, render in renders.items():
            found[name] = render(result)
    return found


def replace_blocks(text: str, generated: dict[str, str], names: tuple[str, ...]) -> tuple[str, list[str]]:
    """``text`` with each named block's content replaced; the names of the blocks that differed."""
    differ: list[str] = []
    for name in names:
        pattern = re.compile(
            rf"(<!-- figures:{re.escape(name)} -->\n)(.*?)(<!-- /figures:{re.escape(name)} -->)", re.DOTALL
        )
        match = pattern.search(text)
        if match is None:
            differ.append(f"{name} (markers missing)")
            continue
        content = generated[name].rstrip("\n") + "\n"
        if match.group(2) != content:
            differ.append(name)
            text = text[: match.start(2)] + content + text[match.end(2) :]
    return text, differ


# -- freshness ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Freshness:
    bench: str
    stale: bool
    why: str


def _git(*args: str, root: Path = ROOT) -> tuple[int, str]:
    out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    return out.returncode, out.stdout.strip()


def freshness(name: str, doc: dict[str, Any] | None, root: Path = ROOT) -> Freshness:
    bench = BY_NAME[name]
    run_it = f"run make {bench.target} (about {bench.minutes:g} min)"
    if doc is None:
        return Freshness(name, True, f"no result: {run_it}")
    run = doc.get("run")
    if not run or not run.get("commit"):
        return Freshness(name, True, f"records no commit (measured before results did): {run_it}")
    if run.get("dirty"):
        return Freshness(name, True, f"measured with uncommitted changes to what it covers: {run_it}")
    code, _ = _git("cat-file", "-e", run["commit"] + "^{commit}", root=root)
    if code != 0:
        return Freshness(name, True, f"its commit {run['commit'][:10]} is not in this history")
    _, later = _git(
        "log", "--format=%h %ad %s", "--date=short", f"{run['commit']}..HEAD", "--", *bench.covers, root=root
    )
    if later:
        changes = later.splitlines()
        newest = changes[0][:100]
        return Freshness(
            name,
            True,
            f"{len(changes)} later commit(s) change what it measures, newest: {newest}; {run_it}",
        )
    return Freshness(
        name, False, f"measures {run['commit'][:10]} ({run['date'][:10]}, load {run['load_start']})"
    )


def report_freshness() -> list[Freshness]:
    states = [freshness(b.name, result(b.name)) for b in BENCHES]
    for s in states:
        print(f"{'STALE' if s.stale else 'fresh'}  {s.bench:<17} {s.why}")
    return states


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help="rewrite the blocks in the files")
    parser.add_argument("--check", action="store_true", help="exit 1 when a file's block differs")
    parser.add_argument("--strict", action="store_true", help="with --check: a stale result fails too")
    args = parser.parse_args()
    generated = blocks()
    failed = False
    for file, names in FILES.items():
        path = ROOT / file
        text = path.read_text(encoding="utf-8")
        new, differ = replace_blocks(text, generated, names)
        if args.write and new != text:
            path.write_text(new, encoding="utf-8")
            print(f"wrote {file}: {', '.join(differ)}")
        elif args.check and differ:
            failed = True
            print(f"{file}: differs from bench/results/*.json in {', '.join(differ)} (run make figures)")
    if not (args.write or args.check):
        for name, content in generated.items():
            print(f"<!-- figures:{name} -->\n{content.rstrip()}\n<!-- /figures:{name} -->\n")
    print("\nresults:")
    stale = [s for s in report_freshness() if s.stale]
    if args.check and args.strict and stale:
        failed = True
    if args.check and not failed:
        print(
            "\nthe generated figures match bench/results/*.json"
            + (f"; {len(stale)} stale result(s) listed" if stale else "")
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
