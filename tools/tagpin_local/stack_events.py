"""The local stack's event sources (:mod:`tagpin_local.stack`): the webhook adapter's server, the
schedulers of the poller and the reconciler (asynchronous invocations, as EventBridge makes them)
and the SQS event sources (:class:`SqsEventSource`: the changes queue to the consumer, the
notifications queue to the webhook, the write-back queue to the write-back function), each run by
its own pollers as Lambda's are, one mechanism for all of them (``deliver``)."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tagpin_local.cfn import load_template
from tagpin_local.http_adapter import WebhookAdapter, WebhookAdapterHandler
from tagpin_local.lambda_process import Function
from tagpin_local.lambda_runtime import failure_event, scheduled_event, sqs_event
from tagpin_local.recursion import LoopDetector, delivering
from tagpin_local.stack_aws import AwsResources

log = logging.getLogger("tagpin.local")


@dataclass
class SqsEventSource:
    """One SQS event source mapping: ``function`` invoked with batches of up to 10 records of the
    queue by ``concurrency`` pollers side by side (its ``ScalingConfig.MaximumConcurrency``: at most
    that many batches in flight), each receiving, invoking and deleting one batch at a time."""

    function: str
    queue_url: str
    queue_arn: str
    concurrency: int
    errors: list[str] = field(default_factory=list)  # the invocations that raised (their error)
    # One receive per queue at a time: moto's ReceiveMessage is not atomic (two concurrent calls can
    # both take the same visible message), SQS's is; without this the pollers side by side would be
    # given duplicates real SQS never gives. Held by ``EventSources.paused`` too.
    receive: threading.Lock = field(default_factory=threading.Lock)


def maximum_concurrency(template: Path, queue: str) -> int | None:
    """``ScalingConfig.MaximumConcurrency`` of the template's SQS event source reading the queue
    resource ``queue`` when it is a number (None: not set, or set from a parameter)."""
    for resource in load_template(template).get("Resources", {}).values():
        for event in resource.get("Properties", {}).get("Events", {}).values():
            props = event.get("Properties", {})
            if event.get("Type") == "SQS" and props.get("Queue") == {"Fn::GetAtt": [queue, "Arn"]}:
                value = props.get("ScalingConfig", {}).get("MaximumConcurrency")
                return value if isinstance(value, int) else None
    return None


class EventSources(AwsResources):
    """What invokes the stack's functions (a part of :class:`tagpin_local.stack.LocalStack`,
    which sets these attributes)."""

    functions: dict[str, Function]
    sources: dict[str, SqsEventSource]  # the SQS event sources by name: changes, notifications, writeback
    loops: LoopDetector
    _adapter: WebhookAdapter | None
    _threads: list[threading.Thread]
    _stop: threading.Event
    _poll_wake: threading.Event

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _start_adapter(self) -> None:
        self._adapter = WebhookAdapter(("127.0.0.1", 0), WebhookAdapterHandler)
        self._spawn(
            lambda: self._adapter.serve_forever(poll_interval=0.05) if self._adapter else None, "webhook"
        )

    def run_poller(self) -> Any:
        """One poll, invoked and waited for (its errors raise here)."""
        return self.functions["poller"].invoke(scheduled_event())

    def run_reconciler(self) -> Any:
        """One reconcile, invoked and waited for (its errors raise here)."""
        return self.functions["reconciler"].invoke(scheduled_event())

    def invoke_async(self, function: str, event: dict[str, Any]) -> bool:
        """Invoke ``function`` as EventBridge does (asynchronously): on an error once more
        (``MaximumRetryAttempts: 1``), then its failure record is put on the default bus, which
        the template's FailedInvocationsRule files in the dead-letter queue (group
        ``failed-invocations``). Lambda waits about a minute before the retry; here it is at once.
        True when an attempt succeeded."""
        error: Exception | None = None
        for _attempt in range(2):
            try:
                self.functions[function].invoke(event)
                return True
            except Exception as exc:
                error = exc
                log.warning("%s invocation failed: %s", function, exc)
        assert error is not None
        self.client("sqs").send_message(
            QueueUrl=self.dlq_url,
            MessageBody=json.dumps(failure_event(f"tagpin-{function}", event, error, attempts=2)),
            MessageGroupId="failed-invocations",
        )
        return False

    def _reconcile_scheduler(self) -> None:
        while not self._stop.is_set():
            interval = self.options.reconcile_interval
            if interval is None:
                self._stop.wait(timeout=1.0)
                continue
            self.invoke_async("reconciler", scheduled_event("tagpin-reconcile"))
            self._stop.wait(timeout=interval)

    def _scheduler(self) -> None:
        while not self._stop.is_set():
            interval = self.options.poll_interval
            if interval is None:
                self._poll_wake.wait(timeout=1.0)
                self._poll_wake.clear()
                continue
            self.invoke_async("poller", scheduled_event())
            self._poll_wake.wait(timeout=interval)
            self._poll_wake.clear()

    def deliver(self, source: str, wait_s: int = 1) -> int:
        """One batch of the event source ``source`` (a key of ``sources``): receive up to 10
        messages and invoke its function with them as Lambda's SQS poller does, delete what
        succeeded; failed records (the handler's partial batch failures, or all of them when the
        invocation raised, whose error goes to the source's ``errors``) stay and reappear after
        their visibility timeout. Returns how many messages were received."""
        mapping = self.sources[source]
        sqs = self.client("sqs")
        with mapping.receive:
            messages = sqs.receive_message(
                QueueUrl=mapping.queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=wait_s,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
        if not messages:
            return 0
        # Lambda's loop guard: a record past 16 invocations of the function in its chain is not
        # handed over (RecursiveLoop: Terminate); it stays on the queue, is delivered again, and the
        # redrive policy dead-letters it after max_receive_count, as SQS does.
        admitted, lineage = self.loops.admit(mapping.function, messages)
        if not admitted:
            return len(messages)
        try:
            with delivering(lineage):
                response = (
                    self.functions[mapping.function].invoke(sqs_event(admitted, mapping.queue_arn)) or {}
                )
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        except Exception as exc:  # the whole batch failed: Lambda lets every record reappear
            log.warning("%s invocation failed: %s", mapping.function, exc)
            mapping.errors.append(f"{type(exc).__name__}: {exc}")
            failed = {m["MessageId"] for m in admitted}
        done = [m for m in admitted if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=mapping.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )
        return len(messages)

    def consume_once(self, wait_s: int = 1) -> int:
        """One delivery from the changes queue (changes and delayed verifications) to the consumer."""
        return self.deliver("changes", wait_s)

    def check_once(self, wait_s: int = 1) -> int:
        """One delivery from the notifications queue (what the webhook's HTTP path queued) to the
        webhook, which checks each notification."""
        return self.deliver("notifications", wait_s)

    @contextlib.contextmanager
    def paused(self, source: str) -> Iterator[None]:
        """The event source's pollers receive nothing meanwhile (a batch they received before is
        still invoked): what is queued stays for the caller's own receives (not ``deliver``, which
        waits for the pause to end)."""
        with self.sources[source].receive:
            yield

    def _start_pollers(self, source: str) -> None:
        """The event source's pollers: as many as its concurrency, each one batch at a time."""
        for n in range(self.sources[source].concurrency):
            self._spawn(lambda: self._poll(source), f"sqs-{source}-{n}")

    def _poll(self, source: str) -> None:
        while not self._stop.is_set():
            try:
                self.deliver(source)
            except Exception:
                if self._stop.is_set():
                    return
                log.exception("receive_message failed (%s queue)", source)
                time.sleep(0.5)
