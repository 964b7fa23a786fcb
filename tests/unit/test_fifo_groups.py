"""The consumer's batch processor (tagpin.adapters.sqs_fifo.GroupedFifoProcessor) works a FIFO batch's
message groups side by side and answers exactly as powertools' sequential
``SqsFifoPartialProcessor(skip_group_on_error=True)``: each group's records in the batch's order,
one at a time; a failed record and every later record of its group reported failed (the later
ones never started); the other groups untouched by it."""

from __future__ import annotations

import contextvars
import random
import threading
import time
from collections import defaultdict
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from hypothesis import given, settings
from hypothesis import strategies as st
from tagpin.adapters.sqs_fifo import GroupedFifoProcessor

# (group or None, fails)
Spec = tuple[str | None, bool]


def event(specs: list[Spec]) -> dict[str, Any]:
    records = []
    for index, (group, _fails) in enumerate(specs):
        attributes = {"ApproximateReceiveCount": "1", "SequenceNumber": str(10**19 + index)}
        if group is not None:
            attributes["MessageGroupId"] = group
        records.append(
            {
                "messageId": f"m{index}",
                "receiptHandle": f"r{index}",
                "body": str(index),
                "attributes": attributes,
                "messageAttributes": {},
                "md5OfBody": "0" * 32,
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q.fifo",
                "awsRegion": "us-east-1",
            }
        )
    return {"Records": records}


class Recorder:
    """A record handler that fails the records ``specs`` says, shuffles the threads' turns with
    short random sleeps and notes what it saw: each group's records in the order they ran, and
    whether two records of one group ever ran at once."""

    def __init__(self, specs: list[Spec], seed: int) -> None:
        self.specs = specs
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.ran: dict[str | None, list[int]] = defaultdict(list)
        self.running: dict[str | None, int] = defaultdict(int)
        self.overlapped = False

    def __call__(self, record: SQSRecord) -> str:
        index = int(record.body)
        group = self.specs[index][0]
        with self.lock:
            self.running[group] += 1
            self.overlapped |= self.running[group] > 1 and group is not None
            self.ran[group].append(index)
            pause = self.random.random() / 1000
        time.sleep(pause)
        with self.lock:
            self.running[group] -= 1
        if self.specs[index][1]:
            raise RuntimeError(f"record {index} failed")
        return f"done {index}"


def expected_failures(specs: list[Spec]) -> list[str]:
    """A failed record and every later record of its group, in the batch's order."""
    failed_groups: set[str] = set()
    failed = []
    for index, (group, fails) in enumerate(specs):
        if (group is not None and group in failed_groups) or fails:
            failed.append(f"m{index}")
            if group is not None:
                failed_groups.add(group)
    return failed


# Groups, a record without one (not from a FIFO queue: a group of its own), one record in three failing.
specs_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d", None]), st.sampled_from([False, False, True])),
    min_size=1,
    max_size=10,
)


@settings(max_examples=150, deadline=None)
@given(specs=specs_strategy, seed=st.integers(0, 2**16))
def test_the_answer_is_the_sequential_processors(specs: list[Spec], seed: int) -> None:
    grouped = Recorder(specs, seed)
    answer = process_partial_response(
        event=event(specs), record_handler=grouped, processor=processor(GroupedFifoProcessor())
    )
    sequential = Recorder(specs, seed)
    reference = process_partial_response(
        event=event(specs),
        record_handler=sequential,
        processor=processor(SqsFifoPartialProcessor(skip_group_on_error=True)),
    )
    assert answer == reference
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == expected_failures(specs)
    # Each group's records ran in the batch's order, never two at once, and none after a failure.
    for group, indexes in grouped.ran.items():
        if group is not None:
            assert indexes == sorted(indexes)
            assert indexes == sequential.ran[group]
    assert not grouped.overlapped
    started = sorted(i for indexes in grouped.ran.values() for i in indexes)
    assert started == sorted(i for indexes in sequential.ran.values() for i in indexes)


def processor(p: SqsFifoPartialProcessor) -> SqsFifoPartialProcessor:
    p.raise_on_entire_batch_failure = False  # as the consumer sets it
    return p


def test_the_groups_run_side_by_side() -> None:
    """Each of two groups' first record waits for the other's: only groups worked at once meet."""
    barrier = threading.Barrier(2, timeout=10)
    met = []

    def handler(record: SQSRecord) -> None:
        if record.body in ("0", "1"):
            met.append(barrier.wait())

    specs: list[Spec] = [("a", False), ("b", False), ("a", False)]
    answer = process_partial_response(
        event=event(specs), record_handler=handler, processor=processor(GroupedFifoProcessor())
    )
    assert answer == {"batchItemFailures": []}
    assert sorted(met) == [0, 1]


def test_a_failure_stops_only_its_group_and_the_rest_of_it_never_starts() -> None:
    ran: list[str] = []
    lock = threading.Lock()

    def handler(record: SQSRecord) -> None:
        with lock:
            ran.append(record.body)
        if record.body == "1":
            raise RuntimeError("the cluster is gone")

    specs: list[Spec] = [("a", False), ("a", True), ("b", False), ("a", False), ("b", False)]
    p = processor(GroupedFifoProcessor())
    answer = process_partial_response(event=event(specs), record_handler=handler, processor=p)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m1"}, {"itemIdentifier": "m3"}]}
    assert sorted(ran) == ["0", "1", "2", "4"]  # m3 (after m1 in group a) not started
    assert [type(info[1]).__name__ for info in p.exceptions] == [
        "RuntimeError",
        "SQSFifoMessageGroupCircuitBreakerError",
    ]


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def test_each_group_sees_the_invocations_context_and_keeps_its_own() -> None:
    """The invocation's log keys (context variables) reach every group; what a record sets stays
    in its group."""
    seen: dict[str, str] = {}

    def handler(record: SQSRecord) -> None:
        group = record.attributes.message_group_id or ""
        seen[record.body] = VAR.get()
        VAR.set(f"set by {group}")

    token = VAR.set("invocation")
    try:
        specs: list[Spec] = [("a", False), ("b", False), ("a", False), ("b", False)]
        process_partial_response(
            event=event(specs), record_handler=handler, processor=processor(GroupedFifoProcessor())
        )
    finally:
        VAR.reset(token)
    assert seen == {"0": "invocation", "1": "invocation", "2": "set by a", "3": "set by b"}
    assert VAR.get() == "unset"
