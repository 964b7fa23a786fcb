"""Round trips that do not depend on each other, overlapped.

The webhook's work per event is a chain of round trips (the followed index, the delivery claim,
the registry, the tag's record, the targets' states, the queue), and the registry delivers its
notifications one after the other: each event's chain is the wait of every event behind it. Where
two of them do not need each other's answer, one is started here (``start``) and the other made
meanwhile; ``all_of`` makes a few at once.

Two kinds of round trip, on workers of their own each: our own store's and queues' (``start``),
which a caller waits for without a time limit (their clients bound them), and a registry's
(``ask_registry``), which a caller waits for only while its invocation lasts (``Budget``): a
registry that accepts a request and answers nothing holds its worker for as long as its client
lets it, so the registries' requests must never take the workers the store's round trips need.
Before they had workers of their own, eight requests to a silent registry held every worker, and
the delivery claims queued behind them were waited for past the invocation's end.

A call runs on a worker thread in a copy of the caller's context (``contextvars``): the
invocation's log keys, and which function runs it (the local runtime attributes each AWS call to
its function that way). A call started here must not itself wait for another started here (the
pools are bounded): the callers are handlers' threads, never these workers.
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

# The pools' thread names (``concurrent.futures`` names each worker ``<prefix>_<n>``).
POOL_NAME, REGISTRY_POOL_NAME = "overlap", "overlap-registry"
WORKER_PREFIXES = (f"{POOL_NAME}_", f"{REGISTRY_POOL_NAME}_")
# A handful of round trips at once per invocation; several invocations share it in the local
# runtime's thread containers.
WORKERS = 8
_POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix=POOL_NAME)
# As many as the registry client lets requests be in flight (its global bound): a request past it
# waits for a slot there, not for a worker here. Threads past those started ahead
# (``start_workers``) are made as they are needed.
_REGISTRIES = ThreadPoolExecutor(max_workers=64, thread_name_prefix=REGISTRY_POOL_NAME)
# The registries' workers started ahead: as many as the store's (a check asks one registry request
# per event, beside its store's round trips).
REGISTRY_WORKERS_STARTED = WORKERS
_STARTING = threading.Lock()  # two containers warming at once: one starts the workers


def start_workers(timeout: float = 1.0) -> None:
    """Both pools' workers started ahead (``tagpin.warming``, at a container's start): a pool starts
    a thread at a call that finds none idle, and the first invocation's overlapped calls would start
    theirs, each start waiting for the new thread to take the interpreter's lock (measured: a
    warmed webhook's first check started three). Each worker is held by a call that waits until
    every worker of its pool runs one, so none is idle before all are started; the calls end
    together (or after ``timeout``), their workers left idle for the invocations. Once a process:
    the local runtime's thread containers share it, and a later container's warming must not hold
    the workers other containers' invocations use."""
    with _STARTING:
        _start_workers(timeout)


@functools.cache  # the pools are the process's: its first container's warming starts their workers
def _start_workers(timeout: float) -> None:
    for pool, workers in ((_POOL, WORKERS), (_REGISTRIES, REGISTRY_WORKERS_STARTED)):
        running = threading.Barrier(workers, timeout=timeout)
        for future in [pool.submit(running.wait) for _ in range(workers)]:
            future.exception()  # a broken barrier (a worker not started in time): left to the calls


def _submit[T](pool: ThreadPoolExecutor, call: Callable[[], T]) -> Future[T]:
    context = contextvars.copy_context()
    return pool.submit(context.run, call)


def start[T](call: Callable[[], T]) -> Future[T]:
    """``call`` (a round trip to our own store or queues) started on a worker thread, in a copy of
    this context; its future."""
    return _submit(_POOL, call)


def ask_registry[T](call: Callable[[], T]) -> Future[T]:
    """``call`` (a registry's request, which may never be answered) started on a worker of the
    registries', in a copy of this context; its future, to be waited for with a timeout."""
    return _submit(_REGISTRIES, call)


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
