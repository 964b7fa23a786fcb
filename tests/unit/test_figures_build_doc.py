"""docs/build.md's import times and package sizes come from bench/results/coldstart.json
(``bench/figures_prose.coldstart_build``), not typed by hand: a result's figure is the doc's."""

from __future__ import annotations

from typing import Any

from bench.figures_prose import PROSE_BLOCKS, coldstart_build


def entry(best: float, median: float, mb: float) -> dict[str, Any]:
    timed = {"import_best_s": best, "import_median_s": median}
    return {
        "with_pyc": timed,
        "without_pyc": timed,
        "unzipped_mb": mb,
        "unzipped_no_pyc_mb": mb,
        "zipped_mb": mb,
    }


def test_the_block_renders_the_results_figures() -> None:
    functions = {
        name: entry(0.1 + n / 100, 0.2 + n / 100, 10.0 * (n + 1))
        for n, name in enumerate(("PollerFunction", "WebhookFunction", "ConsumerFunction", "ConsoleFunction"))
    }
    references = {
        name: entry(0.5, 0.6, 0) for name in ("ref:common-libs", "ref:k8s-client", "ref:consumer-libs")
    }
    doc = {"runs": 11, "functions": functions, "references": references}
    text = coldstart_build(lambda name: doc if name == "coldstart" else None)
    assert "| poller `app` | 100 / 200 ms | 100 / 200 ms |" in text
    assert "consumer 30.0 / 30.0 MB unzipped, 30.0 MB zipped" in text
    assert "best / median of 11 fresh processes" in text
    assert PROSE_BLOCKS["docs/build.md"]["coldstart-build"] is coldstart_build
