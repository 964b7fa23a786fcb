"""The write-back queue on SQS (FIFO): ``WriteRequest`` messages, one message group per repository.

FIFO delivers the messages of one group in order and one batch at a time, so two writers never
push to the same repository at once (each would only lose the race to the other), while the
groups of other repositories are delivered side by side. The deduplication id is the body's hash
(of its flat shape, ``WriteRequest.flat_json``, as deployed stacks sent it): the same request sent
twice within SQS's five minutes (a change delivered again, a poll while the write is pending) is
delivered once; a repeat after that is harmless anyway (the files already
say it: no commit).
"""

from __future__ import annotations

import hashlib
from typing import Any

from tagpin.domain.gitops.writes import WriteRequest


class SqsWriteQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self.url = queue_url

    def send(self, request: WriteRequest) -> None:
        self._sqs.send_message(
            QueueUrl=self.url,
            MessageBody=request.model_dump_json(exclude_none=True),
            MessageGroupId=request.group,
            # the hash of the body deployed stacks sent (flat), so the id stays theirs
            MessageDeduplicationId=hashlib.sha256(request.flat_json().encode()).hexdigest(),
        )
