"""Which wave a target belongs to, and whether a rollout may start on it now (maintenance windows).

Pure functions of the configuration and a clock: no AWS, no cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from zoneinfo import ZoneInfo

from tagpin.domain.config import MaintenanceWindow, RolloutSettings, Target, Wave

REST = "rest"  # the implicit last wave: targets in no configured wave
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


@dataclass
class PlannedWave:
    index: int
    name: str
    wave: Wave | None  # None: the implicit last wave (or the only one when none is configured)
    targets: list[Target] = field(default_factory=list)


def plan(settings: RolloutSettings, targets: list[Target]) -> list[PlannedWave]:
    """The configured waves in order, then the implicit last one; a target joins the first wave
    that matches its cluster (and namespace). Indices are stable whatever the targets are, so a
    stored promotion's wave index keeps its meaning when targets are discovered or removed."""
    waves = [PlannedWave(i, w.name, w) for i, w in enumerate(settings.waves)]
    waves.append(PlannedWave(len(waves), REST if settings.waves else "all", None))
    for target in targets:
        home = next(
            (w for w in waves[:-1] if w.wave and w.wave.matches(target.cluster, target.namespace)), None
        )
        (home or waves[-1]).targets.append(target)
    return waves


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


@dataclass(frozen=True)
class Gate:
    open: bool
    reason: str = ""
    opens_in_s: int = 0  # when closed: seconds until the earliest covering window opens


def window_gate(settings: RolloutSettings, target: Target, now_ms: int) -> Gate:
    """May a rollout start on ``target`` at ``now_ms``? Open when no window covers it."""
    windows = [w for w in settings.maintenance_windows if covers(w, target)]
    if not windows:
        return Gate(True)
    at = datetime.fromtimestamp(now_ms / 1000, UTC)
    if any(_open_at(w, at) for w in windows):
        return Gate(True)
    opens = min(_next_open(w, at) for w in windows)
    wait = max(1, int((opens - at).total_seconds() + 0.999))
    return Gate(False, f"outside its maintenance window (next opens {opens:%Y-%m-%dT%H:%M:%SZ})", wait)
