"""Maintenance windows (``rollout.maintenance_windows``): a rollout starts on a target only while
a window that covers it is open (verification and rollback always run). A target no window covers
may start at any time; one outside every covering window is deferred until the next one opens.
Pure: the configuration and the clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from zoneinfo import ZoneInfo

from tagpin.domain.config import MaintenanceWindow, RolloutSettings, Target
from tagpin.domain.moves import Move
from tagpin.usecases.admission.decision import Decision, GateName, Known, Stage

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def covers(window: MaintenanceWindow, target: Target) -> bool:
    if window.clusters and target.cluster not in window.clusters:
        return False
    return not window.targets or any(fnmatchcase(target.id, pattern) for pattern in window.targets)


def _open_at(window: MaintenanceWindow, at: datetime) -> bool:
    local = at.astimezone(ZoneInfo(window.timezone))
    now, start, end = local.time(), window.start, window.end
    today = _DAYS[local.weekday()]
    yesterday = _DAYS[(local.weekday() - 1) % 7]
    days = {d.value for d in window.days}
    if start < end:
        return today in days and start <= now < end
    # over midnight: opened today after start, or opened yesterday and not yet closed
    return (today in days and now >= start) or (yesterday in days and now < end)


def _next_open(window: MaintenanceWindow, at: datetime) -> datetime:
    zone = ZoneInfo(window.timezone)
    local = at.astimezone(zone)
    days = {d.value for d in window.days}
    for offset in range(8):
        day = (local + timedelta(days=offset)).date()
        if _DAYS[day.weekday()] not in days:
            continue
        opens = datetime.combine(day, window.start, tzinfo=zone)
        if opens > local:
            return opens.astimezone(UTC)
    return at + timedelta(days=7)  # unreachable with at least one day


def window_decision(settings: RolloutSettings, target: Target, now_ms: int) -> Decision:
    """May a rollout start on ``target`` at ``now_ms``? Go when no window covers it or one is open;
    else deferred until the earliest covering window opens."""
    windows = [w for w in settings.maintenance_windows if covers(w, target)]
    at = datetime.fromtimestamp(now_ms / 1000, UTC)
    if not windows or any(_open_at(w, at) for w in windows):
        return Decision.go(GateName.WINDOW)
    opens = min(_next_open(w, at) for w in windows)
    wait = max(1, int((opens - at).total_seconds() + 0.999))
    reason = f"outside its maintenance window (next opens {opens:%Y-%m-%dT%H:%M:%SZ})"
    return Decision.defer(GateName.WINDOW, wait, reason)


class WindowGate:
    name = GateName.WINDOW
    stage = Stage.TARGET

    def __init__(self, settings: Callable[[], RolloutSettings]) -> None:
        self._settings = settings

    def decide(self, move: Move, target: Target, known: Known, now: int) -> Decision:
        return window_decision(self._settings(), target, now)
