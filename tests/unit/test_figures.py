"""bench/figures.py: the generated blocks are found and compared, and a result is stale exactly when
a later commit touches what its bench covers (a git repository of its own, as CI's clone is)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.catalog import BY_NAME
from bench.figures import FILES, ROOT, blocks, freshness, replace_blocks
from bench.figures_docs import console_moto, hanging_runs

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]


def test_a_block_that_differs_is_named_and_rewritten() -> None:
    text = "intro\n<!-- figures:a -->\nold figure\n<!-- /figures:a -->\nafter\n"
    same, differ = replace_blocks(text, {"a": "old figure"}, ("a",))
    assert (same, differ) == (text, [])
    new, differ = replace_blocks(text, {"a": "new figure\n"}, ("a",))
    assert differ == ["a"]
    assert new == "intro\n<!-- figures:a -->\nnew figure\n<!-- /figures:a -->\nafter\n"
    _, missing = replace_blocks("no markers", {"a": "x"}, ("a",))
    assert missing == ["a (markers missing)"]


def test_every_measured_page_has_its_blocks_and_each_renders_from_the_results() -> None:
    generated = blocks()
    for file, names in FILES.items():
        _, differ = replace_blocks((ROOT / file).read_text(encoding="utf-8"), generated, names)
        assert not [d for d in differ if "markers missing" in d], file
    assert all(generated[name].strip() for names in FILES.values() for name in names)


def test_a_docs_figure_follows_its_result() -> None:
    pages = {
        "overview": {"in_process_ms": 20.0, "http_ms": 31.0},
        "targets": {"in_process_ms": 412.4, "http_ms": 9.0},
    }
    doc = {
        "shapes": {"2000x5": {"pages": pages}},
        "run": {"date": "2026-11-27T00:00:00", "commit": "abcdef123", "load_start": 1.25, "load_end": 2.0},
    }
    line = console_moto(lambda name: doc)
    assert "2,000 \u00d7 5, 2026-11-27, abcdef1, load average 1.2-2.0" in line
    assert "the pages take 9\u2013412 ms (the slowest the targets page)" in line
    runs = [
        {"scenario": s, "problem_tags": t, "run": r, "seconds": r / 10, "healthy_changed": 20, "errors": t}
        for s, t in (("frozen", 1), ("frozen", 10), ("frozen-fill", 40), ("slow", 20))
        for r in (1, 2)
    ]
    hanging = {
        "cpus": 2,
        "slow_seconds": 6.0,
        "runs": runs,
        "load_average_before": [3.0],
        "load_average_after": [4.0],
    }
    before = {"runs": [{"hanging": 1, "run": 1, "seconds": 32.5}, {"hanging": 1, "run": 2, "seconds": 31.0}]}
    text = hanging_runs(
        lambda name: {"hanging_registry": hanging, "hanging_registry-before": before}.get(name, hanging)
    )
    assert "2 polls in a row" in text and "1 frozen tag: 0.10 and 0.20 s" in text
    assert "each poll took 32.50 and 31.00 s" in text and "load average 3.0 before, 4.0 after" in text


def _commit(repo: Path, path: str, text: str) -> str:
    file = repo / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    subprocess.run([*GIT, "add", path], cwd=repo, check=True, capture_output=True)
    subprocess.run([*GIT, "commit", "-qm", f"change {path}"], cwd=repo, check=True, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def test_a_result_is_stale_after_a_change_of_what_its_bench_covers_only(repo: Path) -> None:
    covered = BY_NAME["poll"].covers[0]  # the poller's module
    measured = _commit(repo, covered, "v1")
    doc = {
        "run": {"commit": measured, "dirty": False, "date": "2026-11-26T00:00:00+00:00", "load_start": 0.5}
    }
    assert not freshness("poll", doc, root=repo).stale
    _commit(repo, "docs/unrelated.md", "text")
    assert not freshness("poll", doc, root=repo).stale
    _commit(repo, covered, "v2")
    stale = freshness("poll", doc, root=repo)
    assert stale.stale and "1 later commit(s)" in stale.why and "make bench-poll" in stale.why
    assert not freshness("tags", {"run": {**doc["run"], "commit": measured}}, root=repo).stale


def test_a_result_without_a_clean_commit_is_stale(repo: Path) -> None:
    measured = _commit(repo, "README.md", "x")
    assert freshness("poll", None, root=repo).stale
    assert freshness("poll", {"results": []}, root=repo).stale  # measured before results recorded it
    dirty = {"run": {"commit": measured, "dirty": True, "date": "2026-11-26", "load_start": 1.0}}
    assert "uncommitted" in freshness("poll", dirty, root=repo).why
    unknown = {"run": {"commit": "0" * 40, "dirty": False, "date": "2026-11-26", "load_start": 1.0}}
    assert "not in this history" in freshness("poll", unknown, root=repo).why
