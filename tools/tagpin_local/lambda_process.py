"""Lambda containers as processes (``StackOptions.processes``): each container of a function is a
Python process of its own, as on Lambda, instead of a thread of the process that hosts the stack.

Why: as threads, the stack's functions, moto's server, the clusters' fronts and the stack's own
loops share one interpreter and its GIL. Under load (50 tags pushed at once, ``bench/concurrency``)
an invocation waits on everyone else's bytecode: a webhook call took 0.23 s in the storm against
0.05 s alone, and the registry delivers its notifications one after the other, so every push
waited for all the webhook calls before it.

How: a container is ``python -m tagpin_local.lambda_process <function> <timeout> <generation>``,
started with the stack's environment. It loads and warms its handler exactly as a thread container
does (inside, it is a one-container :class:`~tagpin_local.lambda_runtime.LocalFunction`) and serves
invocations one at a time over its stdin and stdout: a 4-byte length and a JSON document each way
(events and results are JSON on Lambda too). What the function prints goes to the stderr it shares
with the stack: its log. The containers are started with the function, side by side, and kept
warm (as provisioned concurrency): a cold start is measured by ``bench/coldstart``, not here.

What carries over from the thread containers: Lambda's loop guard (the lineage an event source
delivers goes with the event; the container stamps what it sends to SQS), ``history`` and the
counters, ``reset`` (the container resets its composition root, ``wiring.reset``, before its next
invocation: the stack does it when it writes the configuration). What Lambda does and a thread
cannot: a container that has not answered by the function's timeout is killed and the invocation
fails (``Sandbox.Timedout``); a container that exits fails its invocation (``Runtime.ExitError``)
and the next invocation starts a new one (a cold start).

What does not carry over: whatever a test does to the functions inside the stack's process
(monkeypatching the library, the IAM recorder that attributes each AWS call to a function through
``lambda_runtime.INVOKED``) does not reach a process. The stack runs its functions as threads
unless ``StackOptions.processes`` is set.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import select
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tagpin_local import recursion
from tagpin_local.lambda_runtime import Invocation, LocalFunction, trigger

type Function = LocalFunction | ProcessFunction

log = logging.getLogger("tagpin.local")

FRAME = struct.Struct(">I")
START_TIMEOUT_S = 180.0  # a container's start (imports and warming) on a busy machine
GRACE_S = 1.0  # past the function's timeout, for the answer to come back


class FunctionError(Exception):
    """An invocation that failed, as Lambda reports it: ``error_type`` and the message."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type


def _send(fd: int, document: Any) -> None:
    data = json.dumps(document, separators=(",", ":")).encode()
    view = memoryview(FRAME.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd: int, size: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    while size:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, size)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int, deadline: float | None = None) -> Any:
    (size,) = FRAME.unpack(_read(fd, FRAME.size, deadline))
    return json.loads(_read(fd, size, deadline))


class _Container:
    """One container: its process, started and warmed when this returns."""

    def __init__(self, function: str, timeout_s: float, generation: int) -> None:
        started = time.monotonic()
        command = [sys.executable, "-m", "tagpin_local.lambda_process", function, str(timeout_s)]
        self.process = subprocess.Popen(
            [*command, str(generation)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # its AWS calls say which function makes them (``app/tagpin-<function>`` in their
            # User-Agent): moto's server counts each function's requests (tagpin_local.moto_server)
            env=dict(os.environ, AWS_SDK_UA_APP_ID=f"tagpin-{function}"),
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in, self._out = self.process.stdin.fileno(), self.process.stdout.fileno()
        try:
            ready = _receive(self._out, started + START_TIMEOUT_S)
        except (EOFError, TimeoutError):
            self.stop()
            raise RuntimeError(
                f"the {function} container did not start (exit code {self.process.returncode})"
            ) from None
        self.pid: int = ready["pid"]
        self.start_s = time.monotonic() - started
        self.first = True

    def call(self, request: dict[str, Any], deadline: float) -> dict[str, Any]:
        _send(self._in, request)
        reply: dict[str, Any] = _receive(self._out, deadline)
        return reply

    def stop(self, grace: float = 2.0) -> None:
        """End of input: the container exits after its invocation; killed after ``grace``."""
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()


class ProcessFunction:
    """A Lambda function of up to ``containers`` process containers, each running one invocation at
    a time; the same interface as :class:`~tagpin_local.lambda_runtime.LocalFunction`."""

    def __init__(self, name: str, timeout_s: float = 60.0, containers: int = 1) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self.containers = containers
        self.generation = 0  # bumped by reset(): the containers reset before their next invocation
        with ThreadPoolExecutor(containers) as pool:
            started = list(pool.map(lambda _n: _Container(name, timeout_s, 0), range(containers)))
        # A container per free slot; None: the slot's container exited (the next one starts anew).
        self._idle: queue.SimpleQueue[_Container | None] = queue.SimpleQueue()
        for container in started:
            self._idle.put(container)
        self._all = list(started)
        self.container_start_s = [c.start_s for c in started]  # each container's start
        self._slots = threading.BoundedSemaphore(containers)
        self._count = threading.Lock()
        self.invocations = 0
        self.cold_starts = containers
        self.concurrent = 0
        self.peak_concurrency = 0
        self.history: deque[Invocation] = deque(maxlen=10_000)

    @property
    def pids(self) -> list[int]:
        """The processes of the containers started so far."""
        return [c.pid for c in self._all]

    def reset(self) -> None:
        """The configuration changed: each container resets its composition root (``wiring.reset``),
        an idle one at once and warms again (side by side, before this returns), a busy one before
        its next invocation."""
        with self._count:
            self.generation += 1
            generation = self.generation
        idle: list[_Container | None] = []
        while self._slots.acquire(blocking=False):  # every free slot's container (None: none)
            idle.append(self._idle.get())

        def rewarm(container: _Container | None) -> _Container | None:
            if container is None:
                return None
            try:
                container.call({"reset": generation}, time.monotonic() + START_TIMEOUT_S)
            except (TimeoutError, EOFError, OSError):  # it hangs or exited: the next one starts anew
                log.warning("a %s container did not reset (pid %d): stopped", self.name, container.pid)
                container.stop(grace=0)
                return None
            return container

        rewarmed: list[_Container | None] = list(idle)
        try:
            with ThreadPoolExecutor(max(1, len(idle))) as pool:
                rewarmed = list(pool.map(rewarm, idle))
        finally:
            for container in rewarmed:
                self._idle.put(container)
                self._slots.release()

    def close(self) -> None:
        """Stop every container (one still running an invocation is killed after a grace period)."""
        for container in self._all:
            container.stop()

    def invoke(self, event: dict[str, Any]) -> Any:
        requested = time.monotonic()
        with self._slots:
            container, cold = self._idle.get(), 0.0
            if container is None:  # its last one exited: start another (a cold start)
                try:
                    container = _Container(self.name, self.timeout_s, self.generation)
                except BaseException:
                    self._idle.put(None)
                    raise
                cold = container.start_s
                with self._count:
                    self.cold_starts += 1
                    self.container_start_s.append(cold)
                    self._all.append(container)
            first, container.first = container.first, False
            with self._count:
                self.invocations += 1
                self.concurrent += 1
                self.peak_concurrency = max(self.peak_concurrency, self.concurrent)
            lineage = recursion.inbound()  # what the event source delivers (an SQS record's trace header)
            request = {
                "event": event,
                "generation": self.generation,
                "lineage": lineage.header() if lineage is not None else None,
            }
            started = time.monotonic()
            kept: _Container | None = container
            reply: dict[str, Any] = {}
            try:
                reply = container.call(request, started + self.timeout_s + GRACE_S)
            except TimeoutError:
                kept = None
                container.stop(grace=0)
                raise FunctionError(
                    "Sandbox.Timedout", f"Task timed out after {self.timeout_s:.2f} seconds"
                ) from None
            except (EOFError, OSError):
                kept = None
                container.stop(grace=0)
                code = container.process.returncode
                raise FunctionError("Runtime.ExitError", f"the container exited (code {code})") from None
            finally:
                with self._count:
                    self.concurrent -= 1
                    finished = time.monotonic()
                    handler_s = reply.get("handler_s", finished - started)
                    self.history.append(
                        Invocation(requested, started, finished, cold, first, trigger(event), handler_s)
                    )
                self._idle.put(kept)
        if "error" in reply:
            raise FunctionError(reply["error"]["errorType"], reply["error"]["errorMessage"])
        return reply["result"]


def serve(function: str, timeout_s: float, generation: int) -> None:
    """A container's life: start and warm the handler, then answer invocations until its input ends."""
    replies = os.dup(1)
    os.dup2(2, 1)  # what the function prints is its log: the stack's stderr
    local = LocalFunction(function, timeout_s=timeout_s)
    _send(replies, {"pid": os.getpid(), "start_s": local.container_start_s[0]})
    while True:
        try:
            request = _receive(0)
        except EOFError:  # the stack stops: close what the functions keep open, as a shutdown would
            from tagpin import wiring

            wiring.reset()
            return
        if "reset" in request:  # reset and warm again, as at the start (the handler loaded anew)
            from tagpin import wiring

            wiring.reset()
            generation = request["reset"]
            local = LocalFunction(function, timeout_s=timeout_s)
            _send(replies, {"reset": generation})
            continue
        if request["generation"] != generation:  # reset while it was busy: before this invocation
            from tagpin import wiring

            wiring.reset()
            generation = request["generation"]
        header = request["lineage"]
        lineage = recursion.Lineage.parse(header) if header else None
        delivered = recursion.delivering(lineage) if lineage is not None else contextlib.nullcontext()
        began = time.monotonic()
        try:
            with delivered:
                reply: dict[str, Any] = {"result": local.invoke(request["event"])}
        except Exception as exc:
            reply = _error(type(exc).__name__, exc)
        reply["handler_s"] = time.monotonic() - began  # its own time, apart from the stack's dispatch
        try:
            _send(replies, reply)
        except (TypeError, ValueError) as exc:  # a result that is not JSON fails, as on Lambda
            _send(replies, _error("Runtime.MarshalError", exc))


def _error(error_type: str, exc: Exception) -> dict[str, Any]:
    """The error reply, and its record in the function's log (as Lambda's runtime writes it)."""
    print(f"[ERROR] {error_type}: {exc}", file=sys.stderr)
    traceback.print_exception(exc, file=sys.stderr)
    return {"error": {"errorType": error_type, "errorMessage": str(exc)}}


if __name__ == "__main__":
    serve(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
