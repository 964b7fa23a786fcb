"""Operational guarantees of the template: every asynchronous path ends in the dead-letter queue,
which has the one alarm of a default stack, every function's failures reach it, and alarms reach
the alarm topic."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.template_support import (
    FUNCTIONS,
    function_props,
    invoked_asynchronously,
    resources,
    template,  # noqa: F401 (the module fixture)
)


def _alarms(tpl: dict[str, Any]) -> list[dict[str, Any]]:
    return [v["Properties"] for v in resources(tpl).values() if v["Type"] == "AWS::CloudWatch::Alarm"]


def _ref(value: Any) -> Any:
    return value.get("Ref") if isinstance(value, dict) else value


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_eventbridge_event_has_a_dead_letter_queue(template, name):  # noqa: F811
    for event_name, event in (function_props(template, name).get("Events") or {}).items():
        if event["Type"] in ("Schedule", "ScheduleV2", "EventBridgeRule"):
            assert "DeadLetterConfig" in event["Properties"], f"{name}.{event_name} has no DeadLetterConfig"


DEFAULT_BUS = {"Fn::Sub": "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"}
# Invoked only synchronously, by an HTTP API or Lambda's SQS poller (no schedule, no EventBridge
# rule, no Invoke of another function): no asynchronous invocation of it can fail, so it has no
# on-failure destination (and no events:PutEvents in its role) and the failed-invocations rule
# does not list it.
SYNCHRONOUS_ONLY = ("ConsoleFunction", "ConsumerFunction", "WriteBackFunction")
ASYNCHRONOUS = tuple(f for f in FUNCTIONS if f not in SYNCHRONOUS_ONLY)


def test_the_synchronous_functions_are_invoked_synchronously_only(template):  # noqa: F811
    for name in FUNCTIONS:
        props = function_props(template, name)
        kinds = {e["Type"] for e in (props.get("Events") or {}).values()}
        assert invoked_asynchronously(template, name) == (name in ASYNCHRONOUS), name
        if name in SYNCHRONOUS_ONLY:
            assert kinds <= {"HttpApi", "SQS"}, name
            assert "EventInvokeConfig" not in props, f"{name}: events:PutEvents for invocations it never has"
    rule = resources(template)["FailedInvocationsRule"]["Properties"]["EventPattern"]
    listed = {p["prefix"]["Fn::GetAtt"][0] for p in rule["detail"]["requestContext"]["functionArn"]}
    assert listed == set(ASYNCHRONOUS)


@pytest.mark.parametrize("name", ASYNCHRONOUS)
def test_failed_async_invocations_go_to_the_dead_letter_queue(template, name):  # noqa: F811
    """Through the default bus (a FIFO queue cannot be a destination): FailedInvocationsRule files
    the function's failure records in the one dead-letter queue, which EventBridge may write to."""
    res = resources(template)
    config = function_props(template, name).get("EventInvokeConfig") or {}
    on_failure = config.get("DestinationConfig", {}).get("OnFailure", {})
    assert on_failure.get("Type") == "EventBridge", f"{name}: failed async invocations are not kept"
    assert on_failure["Destination"] == DEFAULT_BUS
    # one block, the same on each (template.yaml explains it once, on PollerFunction)
    assert config == function_props(template, "PollerFunction")["EventInvokeConfig"]
    rule = res["FailedInvocationsRule"]["Properties"]
    assert rule["EventBusName"] == "default" and rule["State"] == "ENABLED"
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["lambda"]
    assert pattern["detail-type"] == ["Lambda Function Invocation Result - Failure"]
    assert {"prefix": {"Fn::GetAtt": [name, "Arn"]}} in pattern["detail"]["requestContext"]["functionArn"]
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["ChangesDeadLetterQueue", "Arn"]}
    assert target["SqsParameters"]["MessageGroupId"] == "failed-invocations"
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": ["EventsDeadLetterQueue", "Arn"]}
    # the rule's SQS target sets no deduplication id: the FIFO queue must make one from the body
    assert res["ChangesDeadLetterQueue"]["Properties"]["ContentBasedDeduplication"] is True
    (statement,) = res["ChangesDeadLetterQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Condition"] == {
        "ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["FailedInvocationsRule", "Arn"]}}
    }


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_logs_to_its_own_group_with_the_retention(template, name):  # noqa: F811
    group = function_props(template, name).get("LoggingConfig", {}).get("LogGroup")
    assert isinstance(group, dict) and set(group) == {"Ref"}, f"{name}: no LoggingConfig.LogGroup"
    resource = resources(template)[group["Ref"]]
    assert resource["Type"] == "AWS::Logs::LogGroup"
    assert resource["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionInDays"}
    others = [f for f in FUNCTIONS if f != name]
    assert all(function_props(template, f)["LoggingConfig"]["LogGroup"] != group for f in others)


def _event_dead_letter_queues(tpl: dict[str, Any]) -> set[str]:
    """The queues EventBridge sends what it could not deliver to (rules' DeadLetterConfig)."""
    found: set[str] = set()
    for name in FUNCTIONS:
        for event in (function_props(tpl, name).get("Events") or {}).values():
            if "DeadLetterConfig" in event.get("Properties", {}):
                found.add(event["Properties"]["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0])
    for resource in resources(tpl).values():
        if resource["Type"] == "AWS::Events::Rule":
            for target in resource["Properties"].get("Targets", []):
                if "DeadLetterConfig" in target:
                    found.add(target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0])
    return found


def test_every_dead_letter_queue_of_work_has_an_alarm(template):  # noqa: F811
    """Every queue that receives failed work (a queue's dead letters, the failed invocations) has
    an alarm that is always on. The one exception is the queue of events EventBridge could not
    deliver at all (a rule's dead-letter queue must be a standard queue, so it cannot be the
    alarmed FIFO one): only a broken deployment fills it, `tagpin doctor` reports it, and it is
    used for nothing else."""
    res = resources(template)
    work = {
        q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        for q in res.values()
        if q["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in q.get("Properties", {})
    }
    work |= {t["Arn"]["Fn::GetAtt"][0] for t in res["FailedInvocationsRule"]["Properties"]["Targets"]}
    watched = _alarmed_queues(template)
    assert work, "no dead-letter queue found"
    # Registry notifications are hints (the next poll re-resolves the tag): their dead letters are
    # alarmed as the webhook's errors are, with polling off or detailed monitoring.
    assert _notifications_dead_letters_alarmed(template)
    missing = work - watched - {"NotificationsDeadLetterQueue"}
    assert not missing, f"dead-letter queues without an alarm: {sorted(missing)}"
    undelivered = {k for k in res if k.endswith("DeadLetterQueue") and res[k]["Type"] == "AWS::SQS::Queue"}
    undelivered -= work
    assert undelivered == {"EventsDeadLetterQueue"}
    assert _event_dead_letter_queues(template) == undelivered
    # ... and nothing else sends to it: every reference is a DeadLetterConfig (or its own policy)
    others = {
        k: v for k, v in res.items() if k not in ("EventsDeadLetterQueue", "EventsDeadLetterQueuePolicy")
    }
    assert _references_outside_dead_letter_configs(others, "EventsDeadLetterQueue") == []


def _references_outside_dead_letter_configs(node: Any, name: str, path: str = "") -> list[str]:
    if isinstance(node, dict):
        if node in ({"Ref": name}, {"Fn::GetAtt": [name, "Arn"]}):
            return [] if "DeadLetterConfig" in path else [path]
        return [
            hit
            for key, value in node.items()
            for hit in _references_outside_dead_letter_configs(value, name, f"{path}/{key}")
        ]
    if isinstance(node, list):
        return [
            hit
            for i, v in enumerate(node)
            for hit in _references_outside_dead_letter_configs(v, name, f"{path}/{i}")
        ]
    return []


@pytest.mark.parametrize("name", FUNCTIONS)
def test_with_detailed_monitoring_every_function_has_error_and_throttle_alarms(template, name):  # noqa: F811
    watched = {  # the detailed ones, and those always on (the webhook's Errors)
        (_ref(a["Properties"]["Dimensions"][0]["Value"]), a["Properties"]["MetricName"])
        for a in resources(template).values()
        if a["Type"] == "AWS::CloudWatch::Alarm"
        and a["Properties"]["Namespace"] == "AWS/Lambda"
        and a.get("Condition")
        in ("Detailed", "WebhookErrorsAlarmed", "ConsoleDetailed", "WriteBackDetailed", None)
    }
    for metric in ("Errors", "Throttles"):
        assert (name, metric) in watched, f"{name} has no {metric} alarm"


def _notifications_dead_letters_alarmed(template) -> bool:  # noqa: F811
    """The notifications queue's dead letters have an alarm whenever the webhook's errors have one
    (WebhookErrorsAlarmed: polling off, or detailed monitoring), and polling is what heals them."""
    res = resources(template)
    alarm = res["NotificationsDeadLetterAlarm"]
    watched = alarm["Properties"]["Dimensions"][0]["Value"] == {
        "Fn::GetAtt": ["NotificationsDeadLetterQueue", "QueueName"]
    }
    return watched and alarm["Condition"] == res["WebhookErrorsAlarm"]["Condition"] == "WebhookErrorsAlarmed"


def _always_on_alarms(template) -> list[dict]:  # noqa: F811
    return [
        a["Properties"]
        for a in resources(template).values()
        if a["Type"] == "AWS::CloudWatch::Alarm" and "Condition" not in a
    ]


def _alarmed_queues(template) -> set[str]:  # noqa: F811
    """The queues an alarm watches whenever the queue exists: an alarm without a condition, or
    with the queue's own (GitWriteBack's dead-letter queue and its alarm exist together)."""
    res = resources(template)
    return {
        queue
        for a in res.values()
        if a["Type"] == "AWS::CloudWatch::Alarm"
        and a["Properties"]["Namespace"] == "AWS/SQS"
        and isinstance(a["Properties"]["Dimensions"][0]["Value"], dict)
        and (queue := a["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0]) in res
        and a.get("Condition") == res[queue].get("Condition")
    }


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_failure_reaches_an_alarm_that_is_always_on(template, name):  # noqa: F811
    """Without detailed monitoring (the cheap default) a function's failure still reaches a person:
    a failing SQS record ends in the dead-letter queue, a failed scheduled or EventBridge run too
    (through the default bus and FailedInvocationsRule), both under the one alarm; a failed
    webhook request is retried by its sender and caught by the next poll, and with polling off its
    own Errors alarm (not the API's 5xx: the unconfigured webhook's 503 is by design)."""
    res = resources(template)
    props = function_props(template, name)
    alarmed = _alarmed_queues(template)
    for event in props.get("Events", {}).values():
        kind = event["Type"]
        if kind == "SQS":
            queue = event["Properties"]["Queue"]["Fn::GetAtt"][0]
            dlq = res[queue]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
            if dlq == "NotificationsDeadLetterQueue":  # hints: as the webhook's HTTP failures (below)
                assert _notifications_dead_letters_alarmed(template)
                continue
            assert dlq in alarmed, f"{name}: {queue}'s dead letters raise no alarm"
        elif kind in ("Schedule", "EventBridgeRule"):
            assert props["EventInvokeConfig"]["DestinationConfig"]["OnFailure"]["Destination"] == DEFAULT_BUS
            (target,) = res["FailedInvocationsRule"]["Properties"]["Targets"]
            assert target["Arn"]["Fn::GetAtt"][0] in alarmed, f"{name}: failed runs raise no alarm"
        elif kind == "HttpApi" and event["Properties"]["ApiId"] == {"Ref": "ConsoleApi"}:
            continue  # a person sees the error page and tries again (ConsoleErrorsAlarm: detailed)
        elif kind == "HttpApi":
            # A failed request is retried by its sender and caught by the next poll; with polling
            # off nothing would catch it, so then (or with detailed monitoring) its Errors alarm.
            alarm = res["WebhookErrorsAlarm"]
            assert alarm["Properties"]["Dimensions"][0]["Value"] == {"Ref": name}
            assert alarm["Condition"] == "WebhookErrorsAlarmed"
            assert template["Conditions"]["WebhookErrorsAlarmed"] == {
                "Fn::Or": [{"Condition": "Detailed"}, {"Fn::Not": [{"Condition": "PollingEnabled"}]}]
            }
            assert "PollSchedule" in function_props(template, "PollerFunction")["Events"]
        else:
            raise AssertionError(f"{name}: no rule for {kind} events: say how its failures are alarmed")


def test_the_default_alarms_are_few(template):  # noqa: F811
    """$0.10 an alarm a month: the default stack keeps the one a person acts on, on the one queue
    everything that failed for good ends in (docs/cost.md)."""
    assert len(_always_on_alarms(template)) == 1


def test_alarms_notify_the_alarm_topic_which_cloudwatch_may_publish_to(template):  # noqa: F811
    res = resources(template)
    assert res["AlarmTopic"]["Type"] == "AWS::SNS::Topic"
    for alarm in _alarms(template):
        assert {"Ref": "AlarmTopic"} in alarm["AlarmActions"]
    # An alarm cannot publish to a topic encrypted with the AWS-managed key alias/aws/sns (its key
    # policy does not name cloudwatch.amazonaws.com): unencrypted, or a key that grants CloudWatch.
    key = res["AlarmTopic"]["Properties"].get("KmsMasterKeyId")
    if key is not None:
        assert key != "alias/aws/sns", "alarms cannot publish to a topic under the AWS-managed SNS key"
        key_policy = res[_ref(key)]["Properties"]["KeyPolicy"]["Statement"]
        assert any(s.get("Principal", {}).get("Service") == "cloudwatch.amazonaws.com" for s in key_policy)
    (policy,) = [
        r["Properties"]
        for r in res.values()
        if r["Type"] == "AWS::SNS::TopicPolicy" and {"Ref": "AlarmTopic"} in r["Properties"]["Topics"]
    ]
    (grant,) = [
        s
        for s in policy["PolicyDocument"]["Statement"]
        if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert grant["Effect"] == "Allow" and grant["Action"] == "sns:Publish"
    assert grant["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}


def test_poll_runs_that_do_not_finish_alarm_only_when_polling_and_detailed(template):  # noqa: F811
    res = resources(template)
    alarm = res["PollNotFinishedAlarm"]
    assert alarm["Condition"] == "DetailedPolling"
    assert res_condition(template, "DetailedPolling") == {
        "Fn::And": [{"Condition": "Detailed"}, {"Condition": "PollingEnabled"}]
    }
    assert alarm["Properties"]["MetricName"] == "PollBehind"
    # between the runs of a schedule slower than the alarm's period, nothing is sent: keep the state
    assert alarm["Properties"]["TreatMissingData"] == "ignore"


def res_condition(template, name):  # noqa: F811
    return template["Conditions"][name]


def test_sam_deploy_guided_with_every_default_does_not_stop_at_the_auth_prompt(template):  # noqa: F811
    """`sam deploy --guided` asks "<function> has no authentication. Is this okay? [y/N]" for every
    Api/HttpApi event whose API declares no Auth (samcli.commands.deploy.auth_utils), and a user who
    takes the default aborts the deploy. The webhook authenticates in code; its API says so."""
    res = resources(template)
    for name in FUNCTIONS:
        for event in function_props(template, name).get("Events", {}).values():
            if event["Type"] not in ("Api", "HttpApi"):
                continue
            api = res[_ref(event["Properties"]["ApiId"])]
            assert event["Properties"].get("Auth") or api["Properties"].get("Auth"), name


# Longest names AWS accepts, per naming property (each service's quotas page).
NAME_LIMITS = {
    "QueueName": 80,
    "LayerName": 140,
    "FunctionName": 64,
    "RoleName": 64,
    "TableName": 255,
    "TopicName": 256,
    "AlarmName": 255,
    "LogGroupName": 512,
    "Name": 64,  # EventBridge rules, schedules
}


def _with_stack_name(value, stack: str) -> str | None:
    """A name as CloudFormation would make it, for the names built from the stack's name."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Sub" in value and isinstance(value["Fn::Sub"], str):
        return value["Fn::Sub"].replace("${AWS::StackName}", stack)
    return None  # another intrinsic: checked by its own test, if any


def test_every_explicit_name_fits_for_a_128_character_stack_name(template):  # noqa: F811
    """CloudFormation stack names can be 128 characters long; a resource named after the stack must
    still fit its service's limit (SQS queue names: 80), or the first deploy fails."""
    stack = "s" * 128
    problems = []
    for logical_id, resource in resources(template).items():
        for prop, limit in NAME_LIMITS.items():
            name = _with_stack_name(resource.get("Properties", {}).get(prop), stack)
            if name is not None and len(name) > limit:
                problems.append(f"{logical_id}.{prop}: {len(name)} characters (limit {limit})")
    assert problems == []


def test_queues_are_named_by_cloudformation(template):  # noqa: F811
    """No queue carries a name built from the stack's (it would not fit): CloudFormation names them,
    keeping the .fifo suffix of FIFO queues."""
    for logical_id, resource in resources(template).items():
        if resource["Type"] == "AWS::SQS::Queue":
            assert "QueueName" not in resource["Properties"], logical_id
