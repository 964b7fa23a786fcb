"""Which wave a target belongs to: a promotion's plan. Whether a rollout may start on a target now
is admission's (``tagpin.usecases.admission``; maintenance windows: its ``window`` gate).

Pure functions of the configuration: no AWS, no cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tagpin.domain.config import RolloutSettings, Target, Wave

REST = "rest"  # the implicit last wave: targets in no configured wave


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
