"""Starting the parts of a poll split across invocations (``tagpin.domain.shards.PollPart``)."""

from __future__ import annotations

from typing import Protocol

from tagpin.domain.shards import PollPart


class PollParts(Protocol):
    def start(self, parts: list[PollPart]) -> None:
        """Start one invocation per part, asynchronously; raises when one cannot be started."""
        ...
