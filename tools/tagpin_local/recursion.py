"""Lambda's recursive loop detection, modelled for the local stack, driven by template.yaml's
``RecursiveLoop`` settings (moto and an in-process runtime have no such guard; this is it).

What AWS documents ("Use Lambda recursive loop detection to prevent infinite loops", the
PutFunctionRecursionConfig API, the notification AWS sent when it launched) and what the model
takes from it:

- Lambda follows a *chain of requests*, the invocations caused by one triggering event, through
  the X-Ray trace header that supported services carry along, with no active tracing needed: an
  SQS message keeps its sender's ``X-Amzn-Trace-Id`` as its ``AWSTraceHeader`` system attribute,
  the SDK in a function sends the invocation's header with every request (botocore:
  ``add_recursion_detection_header``, from ``_X_AMZN_TRACE_ID``), and Lambda's SQS poller hands a
  message's header to the invocation. The header's lineage counts the invocations per function.
  Model: :data:`TRACE` holds the invocation's :class:`Lineage` (a context variable: several
  invocations run at once in this process, so ``_X_AMZN_TRACE_ID`` cannot be used), and
  :func:`stamp` puts it on every ``SendMessage`` as its ``AWSTraceHeader`` (SQS's part, which moto
  leaves out: it keeps only an explicit ``MessageSystemAttributes``). The header's encoding here
  is the model's own (``Root=...;Lineage=consumer:3,poller:1``): AWS does not document its own.
- Supported services: SQS, SNS, S3 and Lambda's Invoke. Modelled: SQS, the one loop tagpin has
  (the consumer's verifications, approval reminders and promotions, sent to its own queue). No
  function is subscribed to an SNS topic or triggered by S3, and the poller's parts are one Invoke
  each (one hop, never a chain).
- "If your function is invoked more than 16 times in the same chain of requests, Lambda
  automatically stops the next function invocation in that request chain": with the function's
  ``RecursiveLoop`` at ``Terminate`` (the default), invocations 1 to 16 run and the 17th does not.
  ``Allow``: Lambda takes no action. Model: :meth:`LoopDetector.admit`, per function.
- The stopped event: Lambda hands it to the function's dead-letter queue or on-failure
  destination, if any; for an SQS event source the record is returned to its queue unprocessed,
  so SQS delivers it again, stopped again each time, until its redrive policy moves it to the
  queue's dead-letter queue; AWS notifies the account (AWS Health, e-mail) and counts it in the
  ``RecursiveInvocationsDropped`` metric. Model: the record is not given to the function and stays
  on the queue (the local stack leaves it for SQS to redeliver and dead-letter), and every stop is
  recorded (:attr:`LoopDetector.dropped`, logged as a warning).
- One invocation has one trace header: a batch of records carries the most advanced lineage
  among those it was given on to whatever the invocation sends (an assumption, stricter than
  counting per record: AWS does not say which record's header a batch gets).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tagpin_local.cfn import load_template

log = logging.getLogger("tagpin.local")

MAX_INVOCATIONS = 16  # per function and chain of requests; the 17th is stopped
TRACE_ATTRIBUTE = "AWSTraceHeader"


class RecursiveLoop(StrEnum):
    """A function's ``RecursiveLoop`` (``AWS::Lambda::Function``, SAM passes it through)."""

    TERMINATE = "Terminate"  # Lambda's default
    ALLOW = "Allow"


@dataclass(frozen=True)
class Lineage:
    """The invocations of each function so far in one chain of requests."""

    counts: tuple[tuple[str, int], ...] = ()

    def of(self, function: str) -> int:
        return dict(self.counts).get(function, 0)

    def invoked(self, function: str) -> Lineage:
        """The lineage of an invocation of ``function`` caused by an event of this lineage."""
        counts = dict(self.counts)
        counts[function] = counts.get(function, 0) + 1
        return Lineage(tuple(sorted(counts.items())))

    def merge(self, other: Lineage) -> Lineage:
        counts = dict(self.counts)
        for function, count in other.counts:
            counts[function] = max(counts.get(function, 0), count)
        return Lineage(tuple(sorted(counts.items())))

    def header(self) -> str:
        lineage = ",".join(f"{function}:{count}" for function, count in self.counts)
        return f"Root=1-00000000-000000000000000000000000;Lineage={lineage}"

    @classmethod
    def parse(cls, header: str | None) -> Lineage:
        """The lineage in a trace header; none (a new chain) when the header has none."""
        for part in (header or "").split(";"):
            key, _, value = part.partition("=")
            if key.strip() != "Lineage" or not value:
                continue
            counts: dict[str, int] = {}
            for entry in value.split(","):
                function, _, count = entry.rpartition(":")
                if function and count.isdigit():
                    counts[function] = int(count)
            return cls(tuple(sorted(counts.items())))
        return cls()


# The lineage of the invocation running in this context (None: outside any invocation).
TRACE: contextvars.ContextVar[Lineage | None] = contextvars.ContextVar("tagpin_trace", default=None)
# The lineage an event source gives the invocation it is about to make (``delivering``).
_INBOUND: contextvars.ContextVar[Lineage | None] = contextvars.ContextVar("tagpin_inbound", default=None)


@contextlib.contextmanager
def delivering(lineage: Lineage) -> Iterator[None]:
    """The next invocation made in this context is of ``lineage`` (an SQS poller's records')."""
    token = _INBOUND.set(lineage)
    try:
        yield
    finally:
        _INBOUND.reset(token)


def inbound() -> Lineage | None:
    """The lineage an event source is delivering in this context (``delivering``), if any: what a
    process container is handed with the event (``tagpin_local.lambda_process``)."""
    return _INBOUND.get()


@contextlib.contextmanager
def invocation(function: str) -> Iterator[Lineage]:
    """The length of one invocation of ``function``: :data:`TRACE` is its lineage, the one its
    event source delivered (``delivering``), else a new chain's (a schedule, an HTTP request)."""
    lineage = _INBOUND.get() or Lineage().invoked(function)
    inbound, trace = _INBOUND.set(None), TRACE.set(lineage)
    try:
        yield lineage
    finally:
        TRACE.reset(trace)
        _INBOUND.reset(inbound)


def stamp(params: dict[str, Any], **_: Any) -> None:
    """botocore ``before-parameter-build.sqs.SendMessage``: the invocation's trace header as the
    message's ``AWSTraceHeader`` (what the SDK and SQS do together on AWS)."""
    lineage = TRACE.get()
    if lineage is None:
        return
    attributes = params.setdefault("MessageSystemAttributes", {})
    attributes.setdefault(TRACE_ATTRIBUTE, {"DataType": "String", "StringValue": lineage.header()})


def stamp_batch(params: dict[str, Any], **_: Any) -> None:
    """``before-parameter-build.sqs.SendMessageBatch``: :func:`stamp`, on each entry (moto keeps
    no system attribute of a batch's entries: in the local stack a batch starts a new chain, which
    only ever undercounts; a registry's notification is one ``SendMessage``)."""
    for entry in params.get("Entries", []):
        stamp(entry)


_installed = threading.Lock()


def install() -> None:
    """Register :func:`stamp` with botocore, for every session made from now on (once)."""
    import botocore.handlers

    with _installed:
        for entry in (
            ("before-parameter-build.sqs.SendMessage", stamp),
            ("before-parameter-build.sqs.SendMessageBatch", stamp_batch),
        ):
            if entry not in botocore.handlers.BUILTIN_HANDLERS:
                botocore.handlers.BUILTIN_HANDLERS.append(entry)


@dataclass(frozen=True)
class Dropped:
    """An invocation Lambda stopped: the function, the record's message id, its lineage."""

    function: str
    message_id: str
    invocations: int  # the function's invocations in the chain so far (16)


@dataclass
class LoopDetector:
    """Lambda's guard for the functions of one stack, by their ``RecursiveLoop`` settings."""

    settings: Mapping[str, RecursiveLoop]
    dropped: list[Dropped] = field(default_factory=list)
    # the most invocations of each function seen in one chain (what a test measures a chain by)
    longest: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def setting(self, function: str) -> RecursiveLoop:
        return self.settings.get(function, RecursiveLoop.TERMINATE)

    def admit(self, function: str, records: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], Lineage]:
        """The SQS messages (``receive_message``'s, with their system attributes) that may invoke
        ``function``, and the lineage of that invocation; the others are recorded as dropped."""
        admitted: list[dict[str, Any]] = []
        lineage = Lineage()
        for record in records:
            came = Lineage.parse(record.get("Attributes", {}).get(TRACE_ATTRIBUTE))
            if came.of(function) >= MAX_INVOCATIONS and self.setting(function) is RecursiveLoop.TERMINATE:
                stop = Dropped(function, str(record.get("MessageId")), came.of(function))
                with self._lock:
                    self.dropped.append(stop)
                log.warning(
                    "recursive loop detected: %s not invoked for message %s (invoked %d times in its "
                    "chain; RecursiveLoop: Terminate)",
                    function, stop.message_id, stop.invocations,
                )  # fmt: skip
                continue
            admitted.append(record)
            lineage = lineage.merge(came)
        lineage = lineage.invoked(function)
        if admitted:
            with self._lock:
                self.longest[function] = max(self.longest.get(function, 0), lineage.of(function))
        return admitted, lineage


# --------------------------------------------------------------------------- the template's settings
def recursive_loop_settings(template: Path) -> dict[str, RecursiveLoop]:
    """Each function's ``RecursiveLoop`` in a SAM template, by the name of its folder under
    ``functions/`` (its ``CodeUri``), Globals applied; Lambda's default where none is set."""
    document = load_template(template)
    default = document.get("Globals", {}).get("Function", {}).get("RecursiveLoop", RecursiveLoop.TERMINATE)
    settings: dict[str, RecursiveLoop] = {}
    for resource in document.get("Resources", {}).values():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource.get("Properties", {})
        name = str(props.get("CodeUri", "")).strip("/").rsplit("/", 1)[-1]
        settings[name] = RecursiveLoop(props.get("RecursiveLoop", default))
    return settings
