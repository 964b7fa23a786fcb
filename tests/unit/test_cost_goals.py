"""docs/cost.md's summary says, from the figures, whether each goal is met (bench/figures_cost.py):
a total over its goal is rendered missed, one within it met, the fixed part against its own."""

from __future__ import annotations

import copy
import json
from typing import Any

from bench.figures import ROOT
from bench.figures_cost import summary

STORED = {
    name: json.loads((ROOT / f"bench/results/{name}.json").read_text()) for name in ("cost", "cost_history")
}


def rendered(total_1000: float, fixed: float) -> str:
    docs: dict[str, Any] = copy.deepcopy(STORED)
    for estimate in docs["cost"]["estimate"]:
        estimate["by_part"]["fixed"] = fixed
        if estimate["n"] == 1000:
            estimate["total_usd_month"] = total_1000
    return summary(docs.get)


def row(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def test_a_total_over_its_goal_is_missed_and_one_within_it_met() -> None:
    assert row(rendered(1.04, 0.69), "| 1,000 tags").endswith("| ≤ 1.00: **missed** |")
    assert row(rendered(1.00, 0.69), "| 1,000 tags").endswith("| ≤ 1.00: met |")
    assert row(rendered(1.00, 0.69), "| fixed").endswith("| ≤ 0.50: **missed** |")
    assert row(rendered(1.00, 0.42), "| fixed").endswith("| ≤ 0.50: met |")
