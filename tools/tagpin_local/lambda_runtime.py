"""Just enough of the Lambda runtime to run tagpin's real handlers locally: the context object,
the event shapes AWS delivers (HTTP API v2, SQS, EventBridge schedule), handler loading, and where
the functions' output goes.

On Lambda a function's stdout is its log: powertools writes its JSON log lines and its metrics
(EMF, ``{"_aws": ...}``) there. Run in-process, that stdout would be the stdout of whatever hosts
them (``tagpin local``, a test that also runs the CLI), so it is kept apart: while a function runs,
what its thread prints goes to :data:`FUNCTION_OUTPUT`, and so does the powertools logger, whatever
the thread. ``FUNCTION_OUTPUT`` writes to the process's stderr unless told otherwise
(:func:`set_function_output`). Other threads' stdout is untouched.
"""

from __future__ import annotations

import collections
import contextvars
import importlib.util
import os
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO, cast

from tagpin.domain.deadletters import FAILURE_DETAIL_TYPE

from tagpin_local import recursion
from tagpin_local.lambda_events import (
    ACCOUNT,
    REGION,
    failure_event,
    http_api_event,
    scheduled_event,
    sqs_event,
)

__all__ = [  # the events' builders live in lambda_events; imported from here by many
    "ACCOUNT",
    "FAILURE_DETAIL_TYPE",
    "INVOKED",
    "REGION",
    "REPO",
    "Invocation",
    "LocalContext",
    "LocalFunction",
    "failure_event",
    "http_api_event",
    "load_handler",
    "scheduled_event",
    "set_function_output",
    "sqs_event",
    "trigger",
]

REPO = Path(__file__).resolve().parents[2]

Handler = Callable[[dict[str, Any], Any], Any]

# The function whose handler is running in this context: set for the length of each invocation of a
# handler ``load_handler`` returned, so that what happens during it (an AWS call, on this thread or
# on a thread the invocation hands its context to) can be attributed to the function that did it.
# Several functions run in one process here, concurrently: a context variable, not a global.
INVOKED: contextvars.ContextVar[str | None] = contextvars.ContextVar("tagpin_invoked_function", default=None)


@dataclass
class LocalContext:
    """The attributes of ``LambdaContext`` that powertools reads."""

    function_name: str
    memory_limit_in_mb: int = 512
    timeout_s: float = 60.0
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_s

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class _FunctionOutput:
    """Where the in-process functions' output goes: the stream given to :func:`set_function_output`,
    else the process's stderr (looked up on every write: a test framework may swap it)."""

    def __init__(self) -> None:
        self.stream: TextIO | None = None

    def _target(self) -> TextIO:
        return self.stream or sys.__stderr__ or sys.stderr

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()


FUNCTION_OUTPUT = _FunctionOutput()
_running = threading.local()  # .active: this thread is running a function
_swap = threading.Lock()


def set_function_output(stream: TextIO | None) -> None:
    """Send the in-process functions' logs and metrics to ``stream`` (None: the process's stderr)."""
    FUNCTION_OUTPUT.stream = stream


class _RoutedStdout:
    """``sys.stdout`` while functions run in this process: a function's thread writes to
    :data:`FUNCTION_OUTPUT`, every other thread to the stdout this one replaced."""

    def __init__(self, other: TextIO) -> None:
        self.other = other

    def _target(self) -> Any:
        return FUNCTION_OUTPUT if getattr(_running, "active", False) else self.other

    def write(self, text: str) -> int:
        written: int = self._target().write(text)
        return written

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...: the other stdout's
        return getattr(self.other, name)


def _route_stdout() -> None:
    with _swap:
        if not isinstance(sys.stdout, _RoutedStdout):
            sys.stdout = cast(TextIO, _RoutedStdout(sys.stdout))


def _route_logger() -> None:
    """The powertools logger writes to the stream it was given when it was made (stdout then):
    point its handler at :data:`FUNCTION_OUTPUT`."""
    import logging

    observability = sys.modules.get("tagpin.observability")
    if observability is None:
        return
    handler = observability.logger.registered_handler
    if isinstance(handler, logging.StreamHandler) and handler.stream is not FUNCTION_OUTPUT:
        handler.setStream(cast(TextIO, FUNCTION_OUTPUT))


def load_handler(function: str) -> Handler:
    """Import ``functions/<function>/app.py`` under a unique module name and return its handler,
    which runs with ``INVOKED`` set to ``function``."""
    path = REPO / "functions" / function / "app.py"
    spec = importlib.util.spec_from_file_location(f"tagpin_function_{function}", path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _route_logger()
    lambda_handler: Handler = module.lambda_handler

    def handler(event: dict[str, Any], context: Any) -> Any:
        token = INVOKED.set(function)
        try:
            return lambda_handler(event, context)
        finally:
            INVOKED.reset(token)

    return handler


@dataclass(frozen=True)
class Invocation:
    """One invocation, timed (``time.monotonic``): asked for a container, handler started, ended;
    the cold start it waited for (0: a container was idle); whether it was its container's first;
    what invoked it (``trigger``); the seconds its handler ran (``handler_s``: a process container
    measures it itself, and the rest of ``finished - started`` is the stack's dispatch, the event
    and the result carried between the processes; None: not measured apart)."""

    requested: float
    started: float
    finished: float
    container_start_s: float
    first: bool
    trigger: str = ""
    handler_s: float | None = None


def trigger(event: dict[str, Any]) -> str:
    """What invoked a function with ``event``, by its shape: "sqs" (an event source's batch), "http"
    (an HTTP API request), "events" (EventBridge: a schedule, an ECR push)."""
    if "Records" in event:
        return "sqs"
    return "http" if "requestContext" in event else "events"


class LocalFunction:
    """A Lambda function as it scales: up to ``containers`` warm containers, each running one
    invocation at a time. An invocation takes an idle container, or starts a new one (a cold start:
    the handler module loaded again) while fewer than ``containers`` exist, or waits for one.
    ``history`` keeps the last invocations' timings (``Invocation``). Unlike Lambda, the containers
    share one process: the layer's module-level caches (clients, the configuration), and the GIL."""

    def __init__(self, name: str, timeout_s: float = 60.0, containers: int = 1, started: int = 1) -> None:
        """``started``: the containers started now (the others when an invocation finds none idle)."""
        self.name = name
        self.timeout_s = timeout_s
        self.containers = containers
        recursion.install()  # the trace header on what its invocations send to SQS
        self._idle: queue.SimpleQueue[tuple[Handler, bool]] = queue.SimpleQueue()
        self.container_start_s: list[float] = []  # each container's start
        for _ in range(max(1, min(started, containers))):
            began = time.monotonic()
            self._idle.put((self._start_container(), True))
            self.container_start_s.append(time.monotonic() - began)
        self._slots = threading.BoundedSemaphore(containers)
        self._count = threading.Lock()
        self.invocations = 0
        self.cold_starts = len(self.container_start_s)
        self.concurrent = 0
        self.peak_concurrency = 0
        self.history: collections.deque[Invocation] = collections.deque(maxlen=10_000)

    def _start_container(self) -> Handler:
        """Load the handler (Lambda's init), then build what its first invocation would
        (``tagpin.warming``): the first event after a start costs what a warm one does, as with
        provisioned concurrency. Containers share this process: a second finds most of it built."""
        handler = load_handler(self.name)
        if os.environ.get("TAGPIN_LOCAL_WARM") != "0":  # "0": measuring what warming saves (bench/latency.py)
            self.warm()
        return handler

    def warm(self) -> None:
        """Build what the next invocation would (``tagpin.warming``): at a container's start, or
        after the composition root was reset (a benchmark that writes the configuration and then
        measures warm invocations; a process container does it on ``reset``)."""
        from tagpin.warming import warm

        outer = getattr(_running, "active", False)
        _running.active = True  # what it prints is the function's output
        token = INVOKED.set(self.name)  # its calls are the function's (its role's, on AWS)
        try:
            warm(cast(Any, self.name))
        finally:
            INVOKED.reset(token)
            _running.active = outer

    def reset(self) -> None:
        """Nothing of its own: its containers share this process's composition root, which the
        stack resets (``wiring.reset``) for every function at once. (A process container has its
        own: :meth:`tagpin_local.lambda_process.ProcessFunction.reset`.)"""

    def close(self) -> None:
        """Nothing to stop: its containers are this process's threads."""

    def invoke(self, event: dict[str, Any]) -> Any:
        requested = time.monotonic()
        with self._slots:
            cold = 0.0
            try:
                handler, first = self._idle.get_nowait()
            except queue.Empty:  # every started container is busy: start another (a cold start)
                loading = time.monotonic()
                handler, first = self._start_container(), True
                cold = time.monotonic() - loading
                with self._count:
                    self.cold_starts += 1
                    self.container_start_s.append(cold)
            with self._count:
                self.invocations += 1
                self.concurrent += 1
                self.peak_concurrency = max(self.peak_concurrency, self.concurrent)
            _route_stdout()  # again each time: a test framework may have swapped sys.stdout since
            outer = getattr(_running, "active", False)
            _running.active = True
            started = time.monotonic()
            try:
                with recursion.invocation(self.name):  # its chain of requests (Lambda's loop guard)
                    return handler(event, LocalContext(f"tagpin-{self.name}", timeout_s=self.timeout_s))
            finally:
                _running.active = outer
                with self._count:
                    self.concurrent -= 1
                    self.history.append(
                        Invocation(requested, started, time.monotonic(), cold, first, trigger(event))
                    )
                self._idle.put((handler, False))
