"""tagpin.usecases.overlap: round trips that do not need each other's answers made at once, each in
the caller's context (its log keys, the function the local runtime attributes its calls to)."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest
from tagpin.usecases import overlap

KEY: contextvars.ContextVar[str] = contextvars.ContextVar("KEY", default="none")


def test_the_calls_are_made_at_once_and_answered_in_order() -> None:
    barrier = threading.Barrier(3, timeout=10)  # met only when the three calls run at the same time

    def call(n: int) -> int:
        barrier.wait()
        return n

    assert overlap.all_of([lambda: call(1), lambda: call(2), lambda: call(3)]) == [1, 2, 3]


def test_a_started_call_runs_in_the_callers_context() -> None:
    token = KEY.set("invocation")
    try:
        assert overlap.start(KEY.get).result(timeout=10) == "invocation"
    finally:
        KEY.reset(token)


def test_an_error_is_raised_once_every_call_has_ended() -> None:
    ended: list[str] = []

    def slow() -> str:
        time.sleep(0.2)
        ended.append("slow")
        return "slow"

    def failing() -> str:
        raise RuntimeError("the table is gone")

    with pytest.raises(RuntimeError, match="the table is gone"):
        overlap.all_of([failing, slow])
    assert ended == ["slow"]
    assert overlap.all_of([]) == [] and overlap.all_of([lambda: 1]) == [1]
