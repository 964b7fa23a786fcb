"""The local stack's event sources (:mod:`tagpin_local.stack`): the webhook adapter's server, the
schedulers of the poller and the reconciler (asynchronous invocations, as EventBridge makes them)
and the SQS loops that invoke the consumer (changes queue) and the webhook (notifications queue) as
Lambda's pollers do."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tagpin_local.http_adapter import WebhookAdapter, WebhookAdapterHandler
from tagpin_local.lambda_process import Function
from tagpin_local.lambda_runtime import failure_event, scheduled_event, sqs_event
from tagpin_local.recursion import LoopDetector, delivering
from tagpin_local.stack_aws import AwsResources

log = logging.getLogger("tagpin.local")


class EventSources(AwsResources):
    """What invokes the stack's functions (a part of :class:`tagpin_local.stack.LocalStack`,
    which sets these attributes)."""

    functions: dict[str, Function]
    loops: LoopDetector
    consumer_errors: list[str]
    webhook_errors: list[str]
    _adapter: WebhookAdapter | None
    _threads: list[threading.Thread]
    _receive_lock: threading.Lock
    _notifications_receive: threading.Lock
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

    def deliver(
        self,
        function: str,
        queue_url: str,
        queue_arn: str,
        *,
        receive: threading.Lock,
        errors: list[str],
        wait_s: int = 1,
    ) -> int:
        """Receive up to 10 messages from ``queue_url`` and invoke ``function`` with them as Lambda's
        SQS poller does: delete what succeeded; failed records (the handler's partial batch
        failures, or all of them when the invocation raised, whose error goes to ``errors``) stay
        and reappear after their visibility timeout. Returns how many messages were received."""
        sqs = self.client("sqs")
        # One receive per queue at a time: moto's ReceiveMessage is not atomic (two concurrent
        # calls can both take the same visible message), SQS's is; without this the pollers side
        # by side would be given duplicates real SQS never gives.
        with receive:
            messages = sqs.receive_message(
                QueueUrl=queue_url,
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
        admitted, lineage = self.loops.admit(function, messages)
        if not admitted:
            return len(messages)
        try:
            with delivering(lineage):
                response = self.functions[function].invoke(sqs_event(admitted, queue_arn)) or {}
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        except Exception as exc:  # the whole batch failed: Lambda lets every record reappear
            log.warning("%s invocation failed: %s", function, exc)
            errors.append(f"{type(exc).__name__}: {exc}")
            failed = {m["MessageId"] for m in admitted}
        done = [m for m in admitted if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )
        return len(messages)

    def consume_once(self, wait_s: int = 1) -> int:
        """One delivery from the changes queue (changes and delayed verifications) to the consumer."""
        return self.deliver(
            "consumer",
            self.queue_url,
            self.queue_arn,
            receive=self._receive_lock,
            errors=self.consumer_errors,
            wait_s=wait_s,
        )

    def check_once(self, wait_s: int = 1) -> int:
        """One delivery from the notifications queue (what the webhook's HTTP path queued) to the
        webhook, which checks each notification."""
        return self.deliver(
            "webhook",
            self.notifications_url,
            self.notifications_arn,
            receive=self._notifications_receive,
            errors=self.webhook_errors,
            wait_s=wait_s,
        )

    def _notifications_loop(self) -> None:
        self._delivery_loop(self.check_once, "notifications queue")

    def _delivery_loop(self, once: Callable[[], int], queue: str) -> None:
        while not self._stop.is_set():
            try:
                once()
            except Exception:
                if self._stop.is_set():
                    return
                log.exception("receive_message failed (%s)", queue)
                time.sleep(0.5)

    def _sqs_loop(self) -> None:
        self._delivery_loop(self.consume_once, "changes queue")
