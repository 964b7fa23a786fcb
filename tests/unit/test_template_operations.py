"""Operational guarantees of the template: every asynchronous path ends in a dead-letter queue,
every dead-letter queue and every function has an alarm, and alarms reach the alarm topic."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.template_support import (
    function_ids,
    function_props,
    load_template,
    resources,
    template,  # noqa: F401 (the module fixture)
)

FUNCTIONS = function_ids(load_template())


def _alarms(tpl: dict[str, Any]) -> list[dict[str, Any]]:
    return [v["Properties"] for v in resources(tpl).values() if v["Type"] == "AWS::CloudWatch::Alarm"]


def _ref(value: Any) -> Any:
    return value.get("Ref") if isinstance(value, dict) else value


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_eventbridge_event_has_a_dead_letter_queue(template, name):  # noqa: F811
    for event_name, event in (function_props(template, name).get("Events") or {}).items():
        if event["Type"] in ("Schedule", "ScheduleV2", "EventBridgeRule"):
            assert "DeadLetterConfig" in event["Properties"], f"{name}.{event_name} has no DeadLetterConfig"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_failed_async_invocations_go_to_a_dead_letter_queue(template, name):  # noqa: F811
    config = function_props(template, name).get("EventInvokeConfig") or {}
    on_failure = config.get("DestinationConfig", {}).get("OnFailure", {})
    assert on_failure.get("Type") == "SQS", f"{name}: failed async invocations are not kept"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_logs_to_its_own_group_with_the_retention(template, name):  # noqa: F811
    group = function_props(template, name).get("LoggingConfig", {}).get("LogGroup")
    assert isinstance(group, dict) and set(group) == {"Ref"}, f"{name}: no LoggingConfig.LogGroup"
    resource = resources(template)[group["Ref"]]
    assert resource["Type"] == "AWS::Logs::LogGroup"
    assert resource["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionInDays"}
    others = [f for f in FUNCTIONS if f != name]
    assert all(function_props(template, f)["LoggingConfig"]["LogGroup"] != group for f in others)


def test_every_dead_letter_queue_has_an_alarm(template):  # noqa: F811
    res = resources(template)
    dlqs = {
        q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        for q in res.values()
        if q["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in q.get("Properties", {})
    }
    dlqs |= {k for k in res if k.endswith("DeadLetterQueue") and res[k]["Type"] == "AWS::SQS::Queue"}
    watched = {
        a["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
        for a in _alarms(template)
        if a["Namespace"] == "AWS/SQS" and isinstance(a["Dimensions"][0]["Value"], dict)
    }
    assert dlqs, "no dead-letter queue found"
    assert dlqs <= watched, f"dead-letter queues without an alarm: {sorted(dlqs - watched)}"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_has_error_and_throttle_alarms(template, name):  # noqa: F811
    watched = {
        (_ref(a["Dimensions"][0]["Value"]), a["MetricName"])
        for a in _alarms(template)
        if a["Namespace"] == "AWS/Lambda"
    }
    for metric in ("Errors", "Throttles"):
        assert (name, metric) in watched, f"{name} has no {metric} alarm"


def test_alarms_notify_the_alarm_topic(template):  # noqa: F811
    assert resources(template)["AlarmTopic"]["Type"] == "AWS::SNS::Topic"
    for alarm in _alarms(template):
        assert {"Ref": "AlarmTopic"} in alarm["AlarmActions"]


def test_poll_runs_that_do_not_finish_alarm_only_when_polling(template):  # noqa: F811
    alarm = resources(template)["PollNotFinishedAlarm"]
    assert alarm["Condition"] == "PollingEnabled"
    assert alarm["Properties"]["MetricName"] == "PollRunsCompleted"
    assert alarm["Properties"]["TreatMissingData"] == "breaching"
