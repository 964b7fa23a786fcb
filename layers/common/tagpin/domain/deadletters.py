"""What the dead-letter queue holds, read without I/O: the records of failed asynchronous
invocations (what Lambda puts on the default event bus after the last retry, filed in the queue by
the template's FailedInvocationsRule) told apart from dead-lettered changes and verifications.

``tagpin.usecases.deadletters`` lists them (the console) and redrives them (the CLI, the console).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_core import from_json

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
    """The summary of a failed asynchronous invocation's record, or None for any other message
    (pydantic's JSON parser: a body nested too deeply is not JSON here, never a ``RecursionError``)."""
    try:
        event = from_json(body)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("detail-type") != FAILURE_DETAIL_TYPE:
        return None
    detail = _object(event.get("detail"))
    context, response = _object(detail.get("requestContext")), _object(detail.get("responsePayload"))
    function = str(context.get("functionArn", "")).split(":function:", 1)[-1].split(":", 1)[0]
    return FailedRun(
        function=function[:140],
        at=str(detail.get("timestamp") or event.get("time", ""))[:40],
        condition=str(context.get("condition", ""))[:40],
        error=f"{response.get('errorType', '')}: {response.get('errorMessage', '')}".strip(": ")[:300],
    )


def _object(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}
