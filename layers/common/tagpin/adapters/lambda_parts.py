"""The parts of a poll as asynchronous invocations of the poller itself (Lambda's own queue: no
scheduler of ours, no queue to poll while idle). A part that fails is retried by Lambda and then
sent to the function's on-failure destination (the events dead-letter queue), like a failed
scheduled run."""

from __future__ import annotations

import json
from typing import Any

from tagpin.domain.shards import PollPart

PART_EVENT = "tagpin.poll-part"


def part_event(part: PollPart) -> dict[str, Any]:
    return {"source": PART_EVENT, "part": part.index, "of": part.of}


def event_part(event: dict[str, Any]) -> PollPart | None:
    """The part an invocation polls, or None for a scheduled invocation (which starts them)."""
    if event.get("source") != PART_EVENT:
        return None
    return PollPart(int(event["part"]), int(event["of"]))


class LambdaPollParts:
    def __init__(self, client: Any, function: str) -> None:
        """``function``: the poller's own name or ARN (the invocation context's)."""
        self._client = client
        self._function = function

    def start(self, parts: list[PollPart]) -> None:
        for part in parts:
            self._client.invoke(
                FunctionName=self._function,
                InvocationType="Event",
                Payload=json.dumps(part_event(part)).encode(),
            )
