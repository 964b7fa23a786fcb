"""The local stack's Git write-back (:mod:`tagpin_local.stack`; docs/gitops.md), as template.yaml
makes it with ``GitWriteBack=enabled``: the write-back FIFO queue (a message group per
repository) and its dead-letter queue, ``TAGPIN_WRITEBACK_QUEUE_URL`` in the functions'
environment, and an SQS loop that invokes the real write-back handler as Lambda's pollers do
(``StackOptions.git_write_back``; off by default, as in the template)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time

from tagpin_local.lambda_runtime import sqs_event
from tagpin_local.recursion import delivering
from tagpin_local.stack_events import EventSources

log = logging.getLogger("tagpin.local")
WRITEBACK_TIMEOUT_S = 120.0  # template.yaml: WriteBackFunction.Timeout


class GitWriteBack(EventSources):
    """A part of :class:`tagpin_local.stack.LocalStack`, which sets these attributes."""

    # One receive at a time, as for the changes queue (stack_events.consume_once): moto's
    # ReceiveMessage is not atomic, SQS's is.
    _writeback_receive = threading.Lock()
    writeback_url: str = ""
    writeback_dlq_url: str = ""
    writeback_errors: list[str]

    def _create_writeback_queues(self) -> None:
        sqs = self.client("sqs")
        self.writeback_dlq_url = sqs.create_queue(
            QueueName="tagpin-writeback-dlq.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=self.writeback_dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.writeback_url = sqs.create_queue(
            QueueName="tagpin-writeback.fifo",
            Attributes={
                "FifoQueue": "true",
                "ContentBasedDeduplication": "false",
                "VisibilityTimeout": str(self.options.visibility_timeout),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": self.options.max_receive_count}
                ),
            },
        )["QueueUrl"]
        self._saved_env.setdefault("TAGPIN_WRITEBACK_QUEUE_URL", os.environ.get("TAGPIN_WRITEBACK_QUEUE_URL"))
        os.environ["TAGPIN_WRITEBACK_QUEUE_URL"] = self.writeback_url

    def write_once(self, wait_s: int = 1) -> int:
        """Receive up to 10 write requests, invoke the write-back function with them, delete what
        succeeded; failed records come back after the delay the handler set."""
        sqs = self.client("sqs")
        with self._writeback_receive:
            messages = sqs.receive_message(
                QueueUrl=self.writeback_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=wait_s,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
        if not messages:
            return 0
        admitted, lineage = self.loops.admit("writeback", messages)
        arn = sqs.get_queue_attributes(QueueUrl=self.writeback_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        try:
            with delivering(lineage):
                response = self.functions["writeback"].invoke(sqs_event(admitted, arn)) or {}
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        except Exception as exc:  # the whole batch failed: Lambda lets every record reappear
            log.warning("write-back invocation failed: %s", exc)
            self.writeback_errors.append(f"{type(exc).__name__}: {exc}")
            failed = {m["MessageId"] for m in admitted}
        done = [m for m in admitted if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=self.writeback_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )
        return len(messages)

    def _writeback_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.write_once()
            except Exception:
                if self._stop.is_set():
                    return
                log.exception("receive_message failed (write-back queue)")
                time.sleep(0.5)
