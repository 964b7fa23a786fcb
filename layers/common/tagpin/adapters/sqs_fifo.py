"""A FIFO queue's batch with its message groups worked side by side (the consumer's processor).

SQS FIFO orders messages within a message group only; a batch of up to 10 records holds records of
several groups (tagpin: one group per image, one per verification). powertools'
``SqsFifoPartialProcessor(skip_group_on_error=True)`` handles them one after the other, so a batch of
10 independent changes took 10 changes' round trips (the state table, the cluster's GET and PATCH)
in a row. ``GroupedFifoProcessor`` keeps its answer exactly and works the groups concurrently:

* within a group, records run one after the other, in the batch's order (a group is never worked
  by two threads at once);
* a record that fails fails every later record of its group (powertools' circuit breaker
  exception, not handled), and only of its group;
* the response (``batchItemFailures``), ``success_messages``, ``fail_messages`` and ``exceptions``
  are built on the calling thread, in the batch's order, as the sequential processor builds them.

Each group's thread runs in a copy of the calling context (``contextvars``), so the invocation's
log keys reach its records and a record's keys stay its own. The record handler must be safe to run
on several threads at once (tagpin's use cases share only thread-safe clients).
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor

# Groups worked at once: a batch has at most 10 records (the event source's BatchSize), each group's
# records are mostly waits on the network (DynamoDB, the clusters' API servers).
MAX_WORKERS = 10

Outcome = tuple[bool, Any]  # (succeeded, the handler's result or sys.exc_info())


class GroupedFifoProcessor(SqsFifoPartialProcessor):
    """``SqsFifoPartialProcessor(skip_group_on_error=True)``, its groups worked concurrently."""

    def __init__(self, max_workers: int = MAX_WORKERS) -> None:
        super().__init__(skip_group_on_error=True)
        self.max_workers = max_workers

    def process(self) -> list[tuple[Any, ...]]:
        groups: dict[object, list[int]] = {}
        for index, record in enumerate(self.records):
            group = record.get("attributes", {}).get("MessageGroupId")
            # A record without a group (not from a FIFO queue) is a group of its own.
            groups.setdefault(group if group else ("record", index), []).append(index)
        outcomes: dict[int, Outcome] = {}

        def work(indexes: list[int]) -> None:
            for index in indexes:
                outcome = self._call(self.records[index])
                outcomes[index] = outcome
                if not outcome[0]:
                    return  # the later records of this group are not started

        runs = [self._in_context(work, indexes) for indexes in groups.values()]
        workers = min(self.max_workers, len(runs))
        if workers <= 1:
            for run in runs:
                run()
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fifo-group") as pool:
                for future in [pool.submit(run) for run in runs]:
                    future.result()
        return [self._report(index, record, outcomes.get(index)) for index, record in enumerate(self.records)]

    @staticmethod
    def _in_context(work: Callable[[list[int]], None], indexes: list[int]) -> Callable[[], None]:
        context = contextvars.copy_context()
        return lambda: context.run(work, indexes)

    def _call(self, record: dict[str, Any]) -> Outcome:
        """The record handler on one record, as powertools' ``BatchProcessor`` calls it."""
        try:
            data = self._to_batch_type(record=record, event_type=self.event_type, model=self.model)
            if self._handler_accepts_lambda_context:
                return True, self.handler(record=data, lambda_context=self.lambda_context)
            return True, self.handler(record=data)
        except Exception:
            return False, sys.exc_info()

    def _report(self, index: int, record: dict[str, Any], outcome: Outcome | None) -> tuple[Any, ...]:
        """Record ``index``'s outcome, on the calling thread, as the sequential processor does."""
        self._current_group_id = record.get("attributes", {}).get("MessageGroupId")
        data = self._to_batch_type(record=record, event_type=self.event_type, model=self.model)
        if outcome is None:  # a record of a group that failed before it: not started
            return self.failure_handler(record=data, exception=self.group_circuit_breaker_exc)
        succeeded, value = outcome
        if succeeded:
            return self.success_handler(record=record, result=value)
        return self.failure_handler(record=data, exception=value)
