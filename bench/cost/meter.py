"""Count: what one operation on the stack cost (the meter).

Counted per operation: every AWS API call made in this process (``awscalls.AwsCalls``), the registry
requests (HEAD/GET through the proxy), the Kubernetes requests (the log of the front before the API
server), the handler's wall time (= Lambda billed duration, pessimistic: moto on this 2-core machine
answers a DynamoDB call in milliseconds) and the bytes it logs (INFO, plus EMF metrics).
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import cpu
from .awscalls import AwsCalls
from .faults import ServerErrors

LAMBDA_PLATFORM_LOG_BYTES = 350  # START, END and REPORT lines of every invocation (not measured)


class LogBytes(io.TextIOBase):
    """Counts what the handlers write to stdout (powertools JSON logs, EMF metric blobs)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.metrics: set[str] = set()

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        if '"_aws"' in text:
            for line in text.splitlines():
                with contextlib.suppress(ValueError):
                    doc = json.loads(line)
                    for directive in doc.get("_aws", {}).get("CloudWatchMetrics", []):
                        for dims in directive.get("Dimensions", [[]]):
                            key = ",".join(f"{d}={doc.get(d)}" for d in dims)
                            for metric in directive.get("Metrics", []):
                                self.metrics.add(f"{directive.get('Namespace')}:{metric['Name']}[{key}]")
        return len(text)


@dataclass
class Measured:
    """One operation: what it called and how long the handler ran."""

    what: str
    invocations: int = 0
    duration_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)  # the function's own threads (cpu.py)
    aws: dict[str, int] = field(default_factory=dict)
    sqs: dict[str, dict[str, int]] = field(default_factory=dict)  # queue -> operation -> billed requests
    rru: float = 0.0
    wru: float = 0.0
    registry: dict[str, int] = field(default_factory=dict)
    kubernetes: dict[str, int] = field(default_factory=dict)
    log_bytes: int = 0
    functions: dict[str, int] = field(default_factory=dict)  # invocations by function
    # 5xx and throttling answers botocore got (and may have retried) meanwhile: none on a true run
    server_errors: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "invocations": self.functions,
            "duration_ms": [round(d, 1) for d in self.duration_ms],
            "cpu_ms": [round(c, 1) for c in self.cpu_ms],
            "aws_calls": dict(sorted(self.aws.items())),
            # the SQS requests billed, by queue and operation (a 64 KB chunk of payload one request):
            # each queue priced by its type (a FIFO queue's name ends in .fifo)
            "sqs_requests": {q: dict(sorted(ops.items())) for q, ops in sorted(self.sqs.items())},
            "dynamodb_rru": round(self.rru, 1),
            "dynamodb_wru": round(self.wru, 1),
            "registry_requests": self.registry,
            "kubernetes_requests": self.kubernetes,
            "log_bytes": self.log_bytes,
            "aws_server_errors": self.server_errors,
        }


class Meter:
    """Measures one operation on the stack: AWS calls, registry and Kubernetes requests, handler
    time, log bytes."""

    def __init__(
        self, stack: Any, proxy: Any, calls: AwsCalls, logs: LogBytes, errors: ServerErrors | None = None
    ) -> None:
        self.stack = stack
        self.proxy = proxy
        self.calls = calls
        self.logs = logs
        self.errors = errors or ServerErrors()
        self.timings: list[tuple[str, float, float]] = []  # function, wall ms, own CPU ms
        cpu.install()
        for name, function in stack.functions.items():
            self.wrap(name, function)

    def wrap(self, name: str, function: Any) -> None:
        """Time every invocation of a LocalFunction (the adapter and the stack call ``invoke``)."""
        function.invoke = self._timed(name, function.invoke)

    def _timed(self, name: str, invoke: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        def timed(event: dict[str, Any]) -> Any:
            started, own = time.perf_counter(), cpu.Invocation()
            try:
                return invoke(event)
            finally:
                self.timings.append((name, (time.perf_counter() - started) * 1000, own.cpu_ms()))

        return timed

    @contextlib.contextmanager
    def measure(self, what: str) -> Iterator[Measured]:
        result = Measured(what)
        self.calls.reset()
        self.proxy.requests.clear()
        self.stack.kube.clear_requests()
        self.timings.clear()
        before = self.logs.bytes
        errors_before = self.errors.mark()
        self.calls.active = True
        try:
            yield result
        finally:
            self.calls.active = False
        self.calls.settle()  # the updates' write units from the items' sizes, outside the invocations
        result.aws = dict(self.calls.counts)
        result.sqs = {queue: dict(ops) for queue, ops in self.calls.sqs.items()}
        result.rru, result.wru = self.calls.rru, self.calls.wru
        result.registry = dict(collections.Counter(method for method, _p, _w in self.proxy.requests))
        result.kubernetes = dict(
            collections.Counter(
                f"{r.method} {'list' if r.path.rsplit('/', 1)[-1] in LISTED else 'one'}"
                for r in self.stack.kube.requests
            )
        )
        result.duration_ms = [ms for _n, ms, _c in self.timings]
        result.cpu_ms = [c for _n, _ms, c in self.timings]
        result.functions = dict(collections.Counter(n for n, _ms, _c in self.timings))
        result.invocations = len(self.timings)
        result.log_bytes = self.logs.bytes - before + LAMBDA_PLATFORM_LOG_BYTES * result.invocations
        result.server_errors = self.errors.since(errors_before)
        if result.server_errors:  # its time includes botocore's backoff: said where it is seen
            print(f"{what}: AWS answered {result.server_errors} (retried)", file=sys.stderr, flush=True)


LISTED = ("deployments", "statefulsets", "daemonsets", "cronjobs", "rollouts", "pods")
