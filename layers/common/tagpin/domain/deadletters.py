"""What the dead-letter queue holds, read without I/O: the records of failed asynchronous
invocations (what Lambda puts on the default event bus after the last retry, filed in the queue by
the template's FailedInvocationsRule) told apart from dead-lettered changes and verifications.

``tagpin.usecases.deadletters`` lists them (the console) and redrives them (the CLI, the console).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# The detail-type of Lambda's record of an asynchronous invocation that failed every attempt.
FAILURE_DETAIL_TYPE = "Lambda Function Invocation Result - Failure"


@dataclass(frozen=True)
class FailedRun:
    """A failed scheduled run or ECR event: there is nothing to send again (the next run repeats
    the work); it is listed, then removed."""

    function: str
    at: str
    condition: str
    error: str


def failed_invocation(body: str) -> FailedRun | None:
    """The summary of a failed asynchronous invocation's record, or None for any other message."""
    try:
        event = json.loads(body)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("detail-type") != FAILURE_DETAIL_TYPE:
        return None
    detail = event.get("detail") or {}
    context = detail.get("requestContext") or {}
    response = detail.get("responsePayload") or {}
    function = str(context.get("functionArn", "")).split(":function:", 1)[-1].split(":", 1)[0]
    return FailedRun(
        function=function[:140],
        at=str(detail.get("timestamp") or event.get("time", ""))[:40],
        condition=str(context.get("condition", ""))[:40],
        error=f"{response.get('errorType', '')}: {response.get('errorMessage', '')}".strip(": ")[:300],
    )
