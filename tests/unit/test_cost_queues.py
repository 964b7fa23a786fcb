"""The cost model prices each queue Lambda's event sources poll while idle by the queue's type, read
from the template (bench/cost/defaults.py, model.py): a FIFO queue's requests at $0.50 a million, a
standard queue's at $0.40 (bench/cost/prices.py)."""

from __future__ import annotations

import argparse

from tagpin_local.cfn import load_template

from bench.cost import ROOT
from bench.cost.defaults import template_defaults
from bench.cost.model import estimate
from bench.cost.prices import HOURS_PER_MONTH, PRICES, sqs_request_price
from tests.support.cost import row

IDLE = "fixed: SQS event source idle polling (assumed)"
RECEIVES_PER_MINUTE = 15.0


ROW = row()
ARGS = argparse.Namespace(
    changes_per_1000_per_day=0.0,
    clusters=1,
    registries_with_credentials=0,
    esm_receives_per_minute=RECEIVES_PER_MINUTE,
    secret_store=None,
)
PER_QUEUE = RECEIVES_PER_MINUTE * HOURS_PER_MONTH * 60  # idle receives a month, per queue


def test_the_polled_queues_and_their_types_come_from_the_template() -> None:
    defaults = template_defaults()
    resources = load_template(ROOT / "template.yaml")["Resources"]
    types = defaults["consumed_queue_types"]
    assert types == {"NotificationsQueue": "standard", "ChangesQueue": "fifo"}
    for queue, kind in types.items():
        assert resources[queue]["Type"] == "AWS::SQS::Queue"
        assert (resources[queue]["Properties"].get("FifoQueue") is True) == (kind == "fifo")
    assert defaults["consumed_queues"] == len(types)


def test_each_idle_queue_is_priced_by_its_type() -> None:
    assert (sqs_request_price(True), sqs_request_price(False)) == (0.50 / 1e6, 0.40 / 1e6)
    defaults = template_defaults()
    result = estimate(ROW, defaults, ARGS, metrics=0)
    # one standard queue (the notifications) and one FIFO (the changes)
    assert result["lines"][IDLE] == round(PER_QUEUE * (0.40 + 0.50) / 1e6, 4)
    assert result["lines"][IDLE] < round(2 * PER_QUEUE * PRICES["sqs_fifo_request"], 4)

    def idle(types: dict[str, str]) -> float:
        return float(
            estimate(ROW, {**defaults, "consumed_queue_types": types}, ARGS, metrics=0)["lines"][IDLE]
        )

    assert idle({"A": "fifo", "B": "fifo"}) == round(2 * PER_QUEUE * 0.50 / 1e6, 4)
    assert idle({"A": "standard"}) == round(PER_QUEUE * 0.40 / 1e6, 4)
    assert idle({}) == 0.0


def test_the_free_requests_go_to_the_standard_queue_first() -> None:
    defaults = template_defaults()
    # 3 standard queues: 3 x 657,000 requests, the first million free at the standard price
    many = {**defaults, "consumed_queue_types": {f"Q{i}": "standard" for i in range(3)}}
    result = estimate(ROW, many, ARGS, metrics=0)
    assert result["usage"]["sqs_requests_standard"] == 3 * PER_QUEUE
    saved = result["total_usd_month"] - result["after_free_tier_usd_month"]
    fifo = {**defaults, "consumed_queue_types": {f"Q{i}": "fifo" for i in range(3)}}
    fifo_result = estimate(ROW, fifo, ARGS, metrics=0)
    fifo_saved = fifo_result["total_usd_month"] - fifo_result["after_free_tier_usd_month"]
    # the same million requests free: worth $0.10 more on FIFO queues
    assert round(fifo_saved - saved, 2) == 0.10
