"""The cost bench prices each SQS request at the price of the queue it went to (issue 26): the calls
are recorded by queue, each billed per 64 KB chunk of its payload (``bench/cost/awscalls.py``), and
the model prices a FIFO queue's requests at $0.50 a million, a standard queue's at $0.40
(``bench/cost/model.py``, ``prices.py``). Results recorded before the queues were told apart are
priced as they were (all FIFO), so that ``--from-results`` still estimates them."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from bench.cost.awscalls import AwsCalls
from bench.cost.defaults import template_defaults
from bench.cost.model import estimate
from bench.cost.prices import HOURS_PER_MONTH
from tests.support.cost import measurement, row

ARGS = argparse.Namespace(
    changes_per_1000_per_day=20.0,
    clusters=1,
    registries_with_credentials=0,
    esm_receives_per_minute=0.0,
    secret_store=None,
)
CHANGES_A_MONTH = 20.0 * HOURS_PER_MONTH / 24  # at 1,000 tags


@pytest.fixture
def calls(aws: None) -> Iterator[AwsCalls]:
    counted = AwsCalls()
    counted.install()
    counted.active = True
    try:
        yield counted
    finally:
        counted.uninstall()


def test_each_call_is_recorded_by_queue_and_billed_per_64_kb(calls: AwsCalls) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    fifo = sqs.create_queue(QueueName="changes.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    standard = sqs.create_queue(QueueName="notifications")["QueueUrl"]
    calls.reset()
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="1")
    sqs.send_message(QueueUrl=standard, MessageBody="y" * 100_000)  # two 64 KB chunks
    got = sqs.receive_message(QueueUrl=standard, MaxNumberOfMessages=10)["Messages"]
    sqs.delete_message_batch(
        QueueUrl=standard, Entries=[{"Id": "0", "ReceiptHandle": got[0]["ReceiptHandle"]}]
    )
    assert {queue: dict(ops) for queue, ops in calls.sqs.items()} == {
        "changes.fifo": {"SendMessage": 1},
        "notifications": {"SendMessage": 2, "ReceiveMessage": 2, "DeleteMessageBatch": 1},
    }
    assert calls.counts["sqs:SendMessage"] == 2  # the calls themselves, as before


def sqs_line(**operations: dict[str, Any]) -> float:
    result = estimate(row(1000, **operations), template_defaults(), ARGS, metrics=0)
    return float(result["lines"]["changes: SQS"])


def consumer(sqs_requests: dict[str, dict[str, int]] | None) -> dict[str, Any]:
    m = measurement(**{"sqs:ReceiveMessage": 1, "sqs:DeleteMessageBatch": 1, "sqs:SendMessage": 2})
    if sqs_requests is not None:
        m["sqs_requests"] = sqs_requests
    return m


def test_a_request_is_priced_by_its_queues_type() -> None:
    # the consumer of one change: a receive and a delete on the FIFO changes queue, two sends to a
    # standard queue
    split = {
        "tagpin-changes.fifo": {"ReceiveMessage": 1, "DeleteMessageBatch": 1},
        "tagpin-notifications": {"SendMessage": 2},
    }
    line = sqs_line(consumer_one_change=consumer(split))
    assert line == round(CHANGES_A_MONTH * (2 * 0.50 + 2 * 0.40) / 1e6, 4)
    standard = {"tagpin-notifications": {"ReceiveMessage": 1, "DeleteMessageBatch": 1, "SendMessage": 2}}
    assert sqs_line(consumer_one_change=consumer(standard)) == round(CHANGES_A_MONTH * 4 * 0.40 / 1e6, 4)


def test_what_only_the_bench_calls_is_not_priced() -> None:
    waits = {"tagpin-changes.fifo": {"ReceiveMessage": 1, "GetQueueAttributes": 7}}
    assert sqs_line(consumer_one_change=consumer(waits)) == round(CHANGES_A_MONTH * 0.50 / 1e6, 4)


def test_results_without_the_queues_are_priced_as_before_all_fifo() -> None:
    assert sqs_line(consumer_one_change=consumer(None)) == round(CHANGES_A_MONTH * 4 * 0.50 / 1e6, 4)


def test_the_poll_is_charged_only_its_extra_requests_for_a_change() -> None:
    steady = measurement()
    steady["sqs_requests"] = {}
    poll = measurement(**{"sqs:SendMessage": 1})
    poll["sqs_requests"] = {"tagpin-changes.fifo": {"SendMessage": 1}}
    line = sqs_line(steady_poll=steady, poll_one_change=poll, consumer_one_change=consumer({}))
    assert line == round(CHANGES_A_MONTH * 0.50 / 1e6, 4)


def test_the_changes_count_against_the_free_tier_with_every_invocation() -> None:
    verification = measurement()
    verification["invocations"] = {"consumer": 2}  # received before it is due, then when due
    verification["duration_ms"] = [10.0, 10.0]
    result = estimate(row(1000, verification_one_change=verification), template_defaults(), ARGS, 0)
    runs = result["polls_per_month"] + result["reconciles_per_month"]
    # a change: the consumer once, its verification twice (the poll's share is in the poll's run)
    assert result["usage"]["lambda_requests"] == round(runs + CHANGES_A_MONTH * 3, 3)
