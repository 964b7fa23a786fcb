"""The local stack's Git write-back (:mod:`tagpin_local.stack`; docs/gitops.md), as template.yaml
makes it with ``GitWriteBack=enabled``: the write-back FIFO queue (a message group per
repository) and its dead-letter queue, ``TAGPIN_WRITEBACK_QUEUE_URL`` in the functions'
environment, and an SQS loop that invokes the real write-back handler as Lambda's pollers do
(``StackOptions.git_write_back``; off by default, as in the template)."""

from __future__ import annotations

import logging
import os

from tagpin_local.stack_events import EventSources, SqsEventSource

log = logging.getLogger("tagpin.local")
WRITEBACK_TIMEOUT_S = 120.0  # template.yaml: WriteBackFunction.Timeout


class GitWriteBack(EventSources):
    """A part of :class:`tagpin_local.stack.LocalStack`, which sets these attributes."""

    writeback_url: str = ""
    writeback_arn: str = ""
    writeback_dlq_url: str = ""
    writeback_errors: list[str]

    def _create_writeback_queues(self) -> None:
        self.writeback_url, self.writeback_arn, self.writeback_dlq_url = self._create_fifo_queue(
            "tagpin-writeback", {"ContentBasedDeduplication": "true"}
        )
        self._saved_env.setdefault("TAGPIN_WRITEBACK_QUEUE_URL", os.environ.get("TAGPIN_WRITEBACK_QUEUE_URL"))
        os.environ["TAGPIN_WRITEBACK_QUEUE_URL"] = self.writeback_url
        # as many batches at once as the function has containers (the stack's ``containers``)
        self.sources["writeback"] = SqsEventSource(
            "writeback",
            self.writeback_url,
            self.writeback_arn,
            self.options.containers,
            self.writeback_errors,
        )

    def write_once(self, wait_s: int = 1) -> int:
        """Receive up to 10 write requests, invoke the write-back function with them, delete what
        succeeded; failed records come back after the delay the handler set."""
        return self.deliver("writeback", wait_s)
