"""bench/figures.py: the generated blocks are found and compared, and a result is stale exactly when
a later commit touches what its bench covers (a git repository of its own, as CI's clone is)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.catalog import BY_NAME
from bench.figures import freshness, replace_blocks

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
