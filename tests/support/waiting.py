"""Waiting on an outcome, never on a clock: the one ``wait_for`` of the tests (the local stack's,
the real control planes', the browser's). A test that waits names what it waits for, and a
timeout fails it with that name; the deadline only bounds a failure, never a success."""

from __future__ import annotations

import time
from collections.abc import Callable

DEADLINE_S = 60.0


def wait_for[T](
    what: str,
    condition: Callable[[], T],
    deadline_s: float = DEADLINE_S,
    *,
    step: Callable[[], object] | None = None,
    every_s: float = 0.1,
    not_yet: tuple[type[Exception], ...] = (),
    shown: Callable[[], object] | None = None,
) -> T:
    """Ask ``condition`` every ``every_s`` seconds until it gives a truthy value, and return it;
    ``step`` runs between two asks (the consumer once, a click); an exception of a type in
    ``not_yet`` counts as "not yet" (a page that navigates while it is read). An AssertionError
    naming ``what`` when ``deadline_s`` passes first, with what ``shown`` gives then (the state
    that did not become ``what``, to read a failure that does not repeat)."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        try:
            value = condition()
        except not_yet:
            value = None
        if value:
            return value
        if step is not None:
            step()
        time.sleep(every_s)
    seen = "" if shown is None else f" (then: {shown()!r})"
    raise AssertionError(f"not within {deadline_s:.0f} s: {what}{seen}")
