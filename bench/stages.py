"""Where a pushed tag's time goes in the local stack (``bench/concurrency``): the invocations of a
function as its event source makes them (``Calls``), each push cut into stages from them
(``where_the_time_goes``: the registry's notification, the webhook, its check, the queue and the
receive loops, the consumer), and the registry's line of notifications (``notification_line``)."""

from __future__ import annotations

import itertools
import json
import re
import statistics
import time
from typing import Any


def is_sqs(event: dict[str, Any]) -> bool:
    """An SQS event source's batch (the webhook's queued checks), not an HTTP request."""
    return "Records" in event


class Calls:
    """The invocations of a function, as its event source makes them (from this process: the time
    spent waiting for a container included), each with the workloads its event names; ``only``:
    the events to count (the webhook's HTTP requests apart from its queued checks)."""

    def __init__(self, function: Any, only: Any = None) -> None:
        self.calls: list[tuple[frozenset[str], float, float]] = []  # (workloads, called, returned)
        invoke = function.invoke

        def traced(event: dict[str, Any]) -> Any:
            called = time.monotonic()
            try:
                return invoke(event)
            finally:
                if only is None or only(event):
                    names = frozenset(re.findall(r"storm/(app\d+)", json.dumps(event)))
                    self.calls.append((names, called, time.monotonic()))

        function.invoke = traced

    def last(self, name: str, before: float) -> tuple[float, float] | None:
        """(called, returned) of the last call for ``name`` made at or before ``before``."""
        found = [(c, r) for names, c, r in self.calls if name in names and c <= before]
        return max(found) if found else None


PHASES = ("notification", "webhook", "queued + check", "queue + receive", "consumer to the patch")


def where_the_time_goes(
    pushed: dict[str, tuple[str, float]],
    patched: dict[str, float],
    webhook: Calls,
    checks: Calls,
    consumer: Calls,
) -> dict[str, dict[str, float]]:
    """Each patched push's time cut into ``PHASES`` (each clipped at 0: the registry notifies before
    the push returns), median, p90 and max over the pushes, in seconds:

    * notification: the push returned -> the webhook invoked (the registry delivers its
      notifications one at a time: a push waits for the webhook calls of every push before it);
    * webhook: the webhook's HTTP call (its container, its handler: it queues the notification);
    * queued + check: the HTTP call returned -> the webhook's queued check of it returned (the
      notifications queue, its receive loops, the check: claim, registry, record, enqueue);
    * queue + receive: the check returned -> the consumer invoked with the change (SQS, the
      receive loops as Lambda's event source, a consumer container free);
    * consumer to the patch: the consumer's call -> the patch seen (the records before it in its
      batch, or beside it, and its own work)."""
    parts: dict[str, list[float]] = {phase: [] for phase in PHASES}
    for name, seen in patched.items():
        run = consumer.last(name, seen)
        check = checks.last(name, run[0] if run else seen)
        hook = webhook.last(name, check[0] if check else seen)
        if run is None or hook is None or check is None:
            continue
        marks = (pushed[name][1], hook[0], hook[1], check[1], run[0], seen)
        for phase, a, b in zip(PHASES, marks, marks[1:], strict=False):
            parts[phase].append(max(0.0, b - a))
    result = {}
    for phase, values in parts.items():
        ordered = sorted(values)
        if ordered:
            result[phase] = {
                "median_s": round(statistics.median(ordered), 3),
                "p90_s": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
                "max_s": round(ordered[-1], 3),
            }
    return result


def notification_line(webhook: Calls, first: float) -> dict[str, Any]:
    """The registry's notifications, one after the other (distribution delivers them to an
    endpoint one at a time): each webhook call (as the adapter makes it: the container and the
    handler) and the time between one call's return and the next call (the registry's own turn,
    its HTTP request, the local API's event), median and max over the storm, in seconds."""
    calls = sorted((c, r) for _n, c, r in webhook.calls if c >= first)
    spans = [r - c for c, r in calls]
    gaps = [max(0.0, c - r) for (_c0, r), (c, _r1) in itertools.pairwise(calls)]
    return {
        "calls": len(calls),
        "call_median_s": round(statistics.median(spans), 3) if spans else None,
        "call_max_s": round(max(spans), 3) if spans else None,
        "between_median_s": round(statistics.median(gaps), 3) if gaps else None,
        "between_max_s": round(max(gaps), 3) if gaps else None,
        "line_s": round(calls[-1][1] - calls[0][0], 2) if calls else None,
    }
