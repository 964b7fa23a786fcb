"""Round trips that do not depend on each other, overlapped.

The webhook's work per event is a chain of round trips (the followed index, the delivery claim,
the registry, the tag's record, the targets' states, the queue), and the registry delivers its
notifications one after the other: each event's chain is the wait of every event behind it. Where
two of them do not need each other's answer, one is started here (``start``) and the other made
meanwhile; ``all_of`` makes a few at once.

A call runs on a shared worker thread in a copy of the caller's context (``contextvars``): the
invocation's log keys, and which function runs it (the local runtime attributes each AWS call to
its function that way). A call started here must not itself wait for another started here (the
pool is bounded): the callers are handlers' threads, never these workers.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

# A handful of round trips at once per invocation; several invocations share it in the local
# runtime's thread containers.
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="overlap")


def start[T](call: Callable[[], T]) -> Future[T]:
    """``call`` started on a worker thread, in a copy of this context; its future."""
    context = contextvars.copy_context()
    return _POOL.submit(context.run, call)


def all_of[T](calls: Sequence[Callable[[], T]]) -> list[T]:
    """Every call's answer, in order, the calls made at once (the first on this thread). The first
    error raises, once every call has ended."""
    if len(calls) <= 1:
        return [call() for call in calls]
    started = [start(call) for call in calls[1:]]
    try:
        first = calls[0]()
    finally:
        for future in started:
            future.exception()  # wait for each (an error is raised below, in order)
    return [first, *(future.result() for future in started)]
