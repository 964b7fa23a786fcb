"""Interleavings chosen by the test: actors (each a thread running real use-case code) that stop
before each call through a port, and go on one call at a time when the test says so.

``Baton.start(name, fn)`` runs ``fn`` in a thread that parks before its first port call;
``Baton.step(name)`` lets it make that call and run until it parks before the next one (or ends).
Only one actor runs at a time, so a hypothesis state machine that picks which actor steps next
generates the interleavings of the actors' port calls, and replays each one exactly.

``Baton.wrap(obj, name)`` gives a proxy of a port (a repository of ``State``, a cluster) whose
every public method call is a checkpoint of actor ``name``; ``wrap_state`` wraps each repository
of a ``State``. A use case's own thread pool is fine as long as it runs its calls one at a time
(``concurrency=1``): the actor is named by the proxy it calls through, not by its thread.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test
from tagpin.ports.state import State

TIMEOUT_S = 30.0


class Baton:
    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._go: str | None = None
        self._parked: dict[str, str] = {}  # actor -> the call it is parked before
        self._arrivals: dict[str, int] = {}
        self._overlapped: set[str] = set()  # actors that made a port call while one was parked
        self.done: dict[str, Any] = {}  # actor -> its result, or the exception it raised
        self.log: list[tuple[str, str]] = []  # (actor, call), in the order they ran

    # -- actors ------------------------------------------------------------------------------------
    def start(self, name: str, fn: Callable[[], Any]) -> None:
        assert name not in self._arrivals, f"actor {name} started twice"
        self._arrivals[name] = 0

        def run() -> None:
            result: Any
            try:
                self.checkpoint(name, "start")
                result = fn()
            except BaseException as exc:  # recorded for the test to look at
                result = exc
            with self._cv:
                self.done[name] = result
                self._parked.pop(name, None)
                self._cv.notify_all()

        threading.Thread(target=run, name=f"actor-{name}", daemon=True).start()
        with self._cv:
            assert self._cv.wait_for(lambda: name in self._parked, TIMEOUT_S), f"{name} did not start"

    def checkpoint(self, name: str, call: str) -> None:
        with self._cv:
            # An actor's port calls run one at a time: a second one while the first is parked would
            # take its place, and the first would never be let go. Said here, at once, by name, to
            # both calls: the parked one is let go with the same error, so nothing stays parked.
            if name in self._parked:
                self._overlapped.add(name)
                self._cv.notify_all()
                raise AssertionError(_overlap(name, call, self._parked[name]))
            self._parked[name] = call
            self._arrivals[name] += 1
            self._cv.notify_all()
            resumed = self._cv.wait_for(lambda: self._go == name or name in self._overlapped, TIMEOUT_S * 4)
            assert resumed, f"{name} never resumed"
            self._parked.pop(name, None)
            if name in self._overlapped:
                raise AssertionError(_overlap(name, "another call", call))
            self._go = None
            self.log.append((name, call))

    def parked_at(self, name: str) -> str | None:
        """The call ``name`` is parked before (None: running, or ended)."""
        with self._cv:
            return self._parked.get(name)

    def live(self) -> list[str]:
        """The actors parked before a call, by name."""
        with self._cv:
            return sorted(self._parked)

    def step(self, name: str) -> None:
        """Let ``name`` make the call it is parked before, and run until the next one or its end."""
        with self._cv:
            assert name in self._parked, f"{name} is not parked"
            before = self._arrivals[name]
            self._go = name
            self._cv.notify_all()
            moved = self._cv.wait_for(
                lambda: name in self.done or (self._arrivals[name] > before and name in self._parked),
                TIMEOUT_S,
            )
            assert moved, f"{name} neither parked again nor ended (deadlock?)"

    def finish(self, name: str) -> Any:
        while name not in self.done:
            self.step(name)
        return self.done[name]

    def finish_all(self) -> None:
        while live := self.live():
            self.finish(live[0])

    # -- ports -------------------------------------------------------------------------------------
    def wrap[T](self, port: T, name: str) -> T:
        return _Checkpointed(port, self, name)  # type: ignore[return-value]

    def wrap_state(self, state: State, name: str) -> State:
        return State(**{f.name: self.wrap(getattr(state, f.name), name) for f in dataclasses.fields(state)})


def _overlap(name: str, call: str, parked: str) -> str:
    return (
        f"actor {name} called {call} while parked before {parked}: its port calls must run one at "
        "a time (a thread pool of the use case with concurrency=1)"
    )


class _Checkpointed:
    def __init__(self, port: Any, baton: Baton, name: str) -> None:
        self._port, self._baton, self._name = port, baton, name

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._port, attribute)
        if attribute.startswith("_") or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._baton.checkpoint(self._name, f"{type(self._port).__name__}.{attribute}")
            return value(*args, **kwargs)

        return call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # a connector: cluster name -> port
        return _Checkpointed(self._port(*args, **kwargs), self._baton, self._name)


def interleaving_settings(examples: int, steps: int) -> settings:
    """The settings ``run_interleavings`` runs with (the current profile's, ``ci`` under CI)."""
    return settings(
        max_examples=int(os.environ.get("TAGPIN_INTERLEAVINGS", str(examples))),
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def run_interleavings(machine: type[RuleBasedStateMachine], examples: int, steps: int) -> None:
    """Run a state machine of generated interleavings: ``examples`` of them (``TAGPIN_INTERLEAVINGS``
    overrides it: about 1 s an example on 2 cores, 1000 explores further), ``steps`` steps each.

    Under ``CI`` (``.ci/run`` sets ``CI=true``) hypothesis loads its ``ci`` profile, which these
    settings inherit: ``derandomize=True``, so CI replays the same interleavings on every run (a
    failure there is the code's, reproducible, never a draw); elsewhere each run draws new ones,
    and a larger ``TAGPIN_INTERLEAVINGS`` is how to look further (``tests/unit/test_interleave_baton.py``
    checks the inheritance)."""
    run_state_machine_as_test(machine, settings=interleaving_settings(examples, steps))
