"""``PollNotFinishedAlarm`` (DetailedMonitoring=true) against every kind of ``PollSchedule`` the
template accepts: a poller whose every run reaches the end of its tags must leave the alarm OK,
whatever its schedule. The alarm is evaluated here as CloudWatch evaluates it (its Period,
EvaluationPeriods, DatapointsToAlarm and TreatMissingData from template.yaml) over a week of
scheduled runs, each of which completes a minute after it starts (``PollRunsCompleted`` = 1)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit.template_support import resources, template  # noqa: F401 (the module fixture)

WEEK_S = 7 * 86400
RUN_S = 60  # a run's PollRunsCompleted is published this long after the schedule fires
UNITS = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}


def interval_s(schedule: str) -> int:
    """Seconds between two runs of a ``rate(...)`` schedule, or of a once-a-day ``cron(...)``."""
    rate = re.fullmatch(r"rate\((\d+) (\w+)\)", schedule)
    if rate:
        return int(rate[1]) * UNITS[rate[2]]
    assert re.fullmatch(r"cron\(0 3 \* \* \? \*\)", schedule), schedule
    return 86400


def alarm_states(alarm: dict[str, Any], completions: list[int]) -> list[str]:
    """The alarm's state at the end of each period of the week, as CloudWatch computes it: each
    period's Sum of the datapoints in it; a period without any is missing (TreatMissingData); ALARM
    when at least DatapointsToAlarm of the last EvaluationPeriods periods breach."""
    period = int(alarm["Period"])
    threshold = float(alarm["Threshold"])
    assert alarm["Statistic"] == "Sum" and alarm["ComparisonOperator"] == "LessThanThreshold"
    sums: dict[int, float] = {}
    for at in completions:
        sums[at // period] = sums.get(at // period, 0.0) + 1.0
    missing_breaches = alarm.get("TreatMissingData", "missing") == "breaching"
    breaching = [(sums[p] < threshold) if p in sums else missing_breaches for p in range(WEEK_S // period)]
    n = int(alarm["EvaluationPeriods"])
    m = int(alarm.get("DatapointsToAlarm", n))
    return [
        "ALARM" if sum(breaching[max(0, i - n + 1) : i + 1]) >= m else "OK" for i in range(len(breaching))
    ]


@pytest.mark.xfail(
    strict=True,
    reason="defect (audit-iam): PollNotFinishedAlarm sums PollRunsCompleted over a fixed 3600 s period "
    "with missing data breaching, while PollSchedule accepts any rate/cron: with a poll less often "
    "than hourly (rate(2 hours), a daily cron) and DetailedMonitoring=true, every hour without a run "
    "is missing data, so the alarm goes to ALARM (and mails AlarmActions/OKActions) although every "
    "run completed. Fix in template.yaml: refuse such schedules with DetailedMonitoring (a Rule), or "
    "alarm over a period no shorter than the schedule's interval.",
)
@pytest.mark.parametrize("schedule", ["rate(2 hours)", "rate(1 day)", "cron(0 3 * * ? *)"])
def test_every_run_completing_leaves_the_alarm_ok_whatever_the_schedule(
    template: dict[str, Any],  # noqa: F811
    schedule: str,
) -> None:
    pattern = template["Parameters"]["PollSchedule"]["AllowedPattern"]
    assert re.fullmatch(pattern, schedule), "the template accepts this schedule"
    alarm = resources(template)["PollNotFinishedAlarm"]
    assert alarm["Condition"] == "DetailedPolling"  # DetailedMonitoring=true, polling on
    every = interval_s(schedule)
    completions = [start + RUN_S for start in range(0, WEEK_S, every)]
    states = alarm_states(alarm["Properties"], completions)
    assert states.count("ALARM") == 0, f"{states.count('ALARM')} of {len(states)} periods in ALARM"


@pytest.mark.parametrize("schedule", ["rate(5 minutes)", "rate(1 hour)"])
def test_a_schedule_of_at_most_an_hour_leaves_the_alarm_ok(
    template: dict[str, Any],  # noqa: F811
    schedule: str,
) -> None:
    """The evaluation above, where the alarm is right: a run in every hour."""
    alarm = resources(template)["PollNotFinishedAlarm"]["Properties"]
    completions = [start + RUN_S for start in range(0, WEEK_S, interval_s(schedule))]
    assert alarm_states(alarm, completions).count("ALARM") == 0
    # and a poller whose runs all stop at their time budget (no completion) is alarmed
    assert alarm_states(alarm, [])[-1] == "ALARM"
