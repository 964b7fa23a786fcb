"""An in-memory ``PollParts``: records the parts a split poll starts, and runs them when asked
(as Lambda runs the asynchronous invocations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tagpin.adapters.lambda_parts import part_event
from tagpin.domain.shards import PollPart


class RecordingParts:
    def __init__(self, invoke: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.started: list[PollPart] = []
        self._invoke = invoke

    def start(self, parts: list[PollPart]) -> None:
        self.started.extend(parts)

    def run(self) -> list[Any]:
        """Each started part through ``invoke`` (the poller's handler), one after the other."""
        assert self._invoke is not None
        return [self._invoke(part_event(p)) for p in self.started]
