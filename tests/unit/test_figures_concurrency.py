"""The README's row of ``bench/concurrency`` says which storm ran with moto's process first on the
cores (``moto-first``: a figure that cannot be read as measured without it)."""

from __future__ import annotations

from typing import Any

from bench.figures_readme import concurrency


def row(moto_nice: int | None) -> dict[str, Any]:
    return {
        "tags": 50,
        "containers": 3,
        "isolation": "processes",
        "moto_nice": moto_nice,
        "p50_s": 1.0,
        "p90_s": 2.0,
        "p99_s": 3.0,
        "max_s": 4.0,
        "patches_per_workload": [1],
        "patch_conflicts": 0,
    }


def test_a_storm_with_moto_first_says_so_and_one_without_does_not() -> None:
    text = concurrency({"rows": [row(0), row(-10)]})
    _, plain, first = text.split("; 3 container(s)")
    assert "nice" not in plain
    assert "moto's process at nice -10" in first and first.index("nice") < first.index("p50 1.0 s")


def test_a_result_before_the_field_renders_as_before() -> None:
    old = row(None)
    del old["moto_nice"]
    assert "nice" not in concurrency({"rows": [old]})
