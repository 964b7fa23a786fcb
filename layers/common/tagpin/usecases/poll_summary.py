"""A poll's results (``PollSummary``) and the guard around each tag's recording (``guarded``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from tagpin.domain.channels import FollowedKey
from tagpin.domain.outcomes import Observation, TagOutcome

logger = logging.getLogger("tagpin.usecases.poll")  # where these records were logged from before


@dataclass
class PollSummary:
    resolved: int = 0  # tags the registries answered for (or failed to)
    unchanged: int = 0
    changed: int = 0
    enqueued: int = 0
    errors: int = 0
    ignored: int = 0  # attestation-only index changes
    not_reached: int = 0  # left for the next run (time budget)
    cursor: FollowedKey | None = None
    behind: bool = False  # the part's pass went on over an hour and more than one run (PollPass.behind)
    results: list[Observation] = field(default_factory=list)  # everything but "unchanged"

    def counts(self) -> dict[str, int]:
        return {
            k: getattr(self, k)
            for k in ("resolved", "unchanged", "changed", "enqueued", "errors", "ignored", "not_reached")
        }


def guarded(call: Callable[[], Observation | None]) -> Observation | None:
    """Run one tag's recording; a failure of our own store or queue (a throttle, say) is that
    tag's error for this run, not the end of the run: the others go on and the cursor is kept."""
    try:
        return call()
    except Exception as exc:
        followed = call.args[0] if isinstance(call, partial) and call.args else None
        image = cast(FollowedKey, getattr(followed, "image", "?"))
        message = f"{type(exc).__name__}: {exc}"
        logger.warning(
            "recording a tag failed; the next run retries it", extra={"image": image, "error": message}
        )
        return Observation(image, TagOutcome.ERROR, error=message)
