"""A poll's pass: one time through every tag of a part (the whole poll, or one ``PollPart``).

A run that runs short of time stops and leaves a cursor; the next run continues the same pass
from there. ``PollPass`` is what the state table keeps of it (``POLL`` / ``CURSOR``): the cursor,
and since when the pass in progress has gone on (the start of its first run).

A part is **behind** when a run that continued a pass stops again and the pass began an hour or
more ago: a tag then waits more than an hour, and more than one run of whatever schedule, to be
polled again. The poller says so with ``PollBehind`` on every run (1 or 0), and
``PollNotFinishedAlarm`` (DetailedMonitoring) alarms on it. Each part says it of itself, so a part
that never finishes is not hidden by the others, and a schedule slower than hourly, between runs,
sends nothing rather than "not finished" (the alarm keeps its state while no run reports).
"""

from __future__ import annotations

from dataclasses import dataclass

from tagpin.domain.channels import FollowedKey

BEHIND_AFTER_MS = 3_600_000


@dataclass(frozen=True)
class PollPass:
    cursor: FollowedKey | None = None  # the first tag the last run did not finish; None: it finished
    since: int | None = None  # epoch ms: when the pass in progress began (None when it finished)

    def chunks(self, images: list[FollowedKey], size: int) -> list[list[FollowedKey]]:
        """The images to resolve, in chunks of ``size``, from the cursor (where the last run
        stopped) on, wrapping around."""
        order = sorted(images)
        if self.cursor is not None:
            first = next((i for i, image in enumerate(order) if image >= self.cursor), 0)
            order = order[first:] + order[:first]
        return [order[i : i + size] for i in range(0, len(order), size)]

    def after(self, stopped_at: FollowedKey | None, started: int) -> PollPass:
        """This pass once a run started (epoch ms ``started``) from it stopped at ``stopped_at``
        (None: it reached the end of its tags)."""
        if stopped_at is None:
            return PollPass()
        if self.cursor is None or self.since is None:  # the run began this pass
            return PollPass(stopped_at, started)
        return PollPass(stopped_at, self.since)

    def behind(self, stopped_at: FollowedKey | None, now: int) -> bool:
        """Whether a run that started from this pass and stopped at ``stopped_at`` leaves its part
        behind: it continued a pass (not its first run) that it did not finish either, begun an hour
        or more before ``now``."""
        return (
            stopped_at is not None
            and self.cursor is not None
            and self.since is not None
            and now - self.since >= BEHIND_AFTER_MS
        )
