"""The garbage collector of a handler's process: none while its modules load; in a process that
polls, fewer collections per poll.

A handler's import allocates some 27,000 objects that live as long as the container (its modules,
their classes, powertools', pydantic's and the settings' objects): with CPython's default young
threshold the collector ran about 20 times during it (10-12 ms of the poller's and the webhook's
import, 19-25 ms of the consumer's, measured with ``gc.callbacks``), to find almost nothing. The
handlers pause it (``gc.disable()``) before their first import and call ``after_imports`` after
their last: it resumes the collector with what the imports built frozen (below), so no later
collection walks it either (it is not garbage: ``gc.freeze`` is what the poller did already).

A steady poll allocates a few short-lived container objects per tag (the request's coroutines,
tasks and futures, its response, its resolution), nearly all freed by reference counting within
the request; with CPython's default young threshold (2,000 allocations) the collector still runs
every few requests, and every collection that reaches the oldest generation walks every object of
the process (the imported modules, the AWS SDK's models, the followed tags' configuration).

``collect_for_polls`` (the poller's handler calls it when it loads, in place of ``after_imports``;
``bench/poll.py``'s worker before its poll: one place for both):

- raises the young generation's threshold to ``YOUNG`` allocations (never lowers it): fewer young
  collections, and fewer survivors promoted into the older generations, so fewer full ones;
- freezes (``gc.freeze``) what the process holds when it is first called (when nothing is frozen
  yet): the collector no longer walks it. No collection runs first: one costs 12-22 ms at the
  handler's import (27,500 objects, measured), on the cold start, to find about 150 unreachable
  objects (the imports' garbage), which are frozen with the rest and kept: a few KB, once. Frozen
  objects are still freed by reference counting when they are dropped; only a reference cycle
  among them would be kept until the process ends, and what is alive when the handler's module
  loads is its imports and its module-level objects, which live as long as the container anyway.

Memory: at most ``YOUNG`` more unreachable container objects wait for a collection than before
(cycles only: everything else is freed by reference counting as before), a few MB at the worst;
the poller at 10,000 tags peaks at about 120 MB (``bench/poll.py``) of its 256 MB goal.
Measured on the steady poll of 10,000 tags (``bench/poll.py``'s layout, a warm client, each poll's
collections timed with ``gc.callbacks``, load 15): 86-179 ms of CPU in 56-57 collections as it
was, 15-17 ms in 3 with the threshold alone, 11-13 ms in 2 with the freeze too (made after the
bench's imports there; the handler's freezes less, what its module imports); at 1,000 tags about
5 ms in 7 collections as it was.
"""

from __future__ import annotations

import gc

YOUNG = 20_000  # allocations between young collections (CPython 3.13's default: 2,000)


def after_imports() -> None:
    """The collector resumed after a handler's imports (paused before them), what they built frozen
    (once per process: the local stack's containers share one)."""
    gc.enable()
    if gc.get_freeze_count() == 0:
        gc.freeze()


def collect_for_polls() -> None:
    young, *older = gc.get_threshold()
    if young < YOUNG:
        gc.set_threshold(YOUNG, *older)
    after_imports()
