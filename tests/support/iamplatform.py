"""What Lambda itself does with a function's role, as template.yaml configures it
(``platform_calls``): poll its SQS event sources, hand the records of failed asynchronous
invocations to its ``EventInvokeConfig`` destination (only a function invoked asynchronously has
any: tests/unit/template_support.py ``invoked_asynchronously``), send its traces with
``Tracing: Active``, write its log group. The IAM proof (tests/integration/test_iam.py) adds these
to the calls it recorded, so that the grants they need count as used.
"""

from __future__ import annotations

from collections.abc import Mapping

from tests.support.iam import ACCOUNT, REGION, Call, Request, make_arn
from tests.support.iamroles import (
    DESTINATION_ACTIONS,
    destinations,
    loaded_template,
    logical_id,
    physical,
    resolve,
    template_support,
)


def platform_calls(
    function: str, environment: Mapping[str, str], parameters: Mapping[str, str] | None = None
) -> list[Call]:
    """What Lambda does with the function's role, as the template configures it: poll its SQS event
    sources (ReceiveMessage, DeleteMessage, GetQueueAttributes), send the records of failed
    asynchronous invocations to its EventInvokeConfig destination (the default event bus), write
    its log group."""
    ts = template_support()
    template = loaded_template()
    fn = logical_id(function)
    params, attrs = physical(environment, parameters or {}, fn)
    props = ts.function_props(template, fn)
    env = tuple(sorted(environment.items()))
    calls = []
    for event in ts.events_of_type(props, "SQS"):
        queue = resolve(event["Queue"], params, attrs)
        requests = tuple(
            Request(f"sqs:{a}", queue) for a in ("ReceiveMessage", "DeleteMessage", "GetQueueAttributes")
        )
        calls.append(Call(function, "lambda:event source mapping", requests, environment=env))
    # Only an asynchronous invocation can fail into its destination: a schedule, an EventBridge
    # rule, an Invoke by a role (a split poll's parts). The others' destinations stay unused.
    if ts.invoked_asynchronously(template, fn):
        for kind, destination in destinations(props, params, attrs):
            calls.append(
                Call(
                    function,
                    "lambda:OnFailure destination",
                    (Request(DESTINATION_ACTIONS[kind], destination),),
                    environment=env,
                )
            )
    if ts.evaluate(template, props.get("Tracing"), params) == "Active":  # Lambda sends its traces
        requests = (Request("xray:PutTraceSegments", "*"), Request("xray:PutTelemetryRecords", "*"))
        calls.append(Call(function, "lambda:tracing", requests, environment=env))
    group = props.get("LoggingConfig", {}).get("LogGroup")
    if group is not None:
        stream = make_arn(
            "logs", REGION, ACCOUNT, f"log-group:{resolve(group, params, attrs)}:log-stream:local"
        )
        requests = (Request("logs:CreateLogStream", stream), Request("logs:PutLogEvents", stream))
        calls.append(Call(function, "lambda:logs", requests, environment=env))
    return calls
