"""Each function's role as template.yaml defines it (``role``), and the verdicts over recorded
calls (``denied``: a call its role does not allow; ``unused``: a grant no call uses).

A role is the function's Policies with the stack's parameters decided, intrinsic functions
evaluated to ARNs of the resources the function's environment names (as CloudFormation wires them:
``TAGPIN_STATE_TABLE`` is ``!Ref StateTable`` ...), SAM policy templates expanded, plus what SAM
adds to every such role: ``AWSLambdaBasicExecutionRole``, the X-Ray policy with ``Tracing:
Active``, ``AWSLambdaSQSQueueExecutionRole`` per SQS event source, the action of an
``EventInvokeConfig`` destination; and the ``AWS::IAM::Policy`` resources attached to it. A
function's ``PermissionsBoundary`` bounds them all (``Role.boundary``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from moto.iam.access_control import PermissionResult

from tests.support.iam import (
    ACCOUNT,
    PARTITION,
    REGION,
    Call,
    Granted,
    Role,
    Statement,
    as_list,
    make_arn,
    queue_arn,
    table_arn,
)


def template_support() -> Any:
    from tests.unit import template_support

    return template_support


@cache
def loaded_template() -> dict[str, Any]:
    loaded: dict[str, Any] = template_support().load_template()
    return loaded


def logical_id(function: str) -> str:
    """The template's logical id of a function by its tagpin.settings name (its CodeUri's folder)."""
    ts = template_support()
    template = loaded_template()
    for fn in ts.function_ids(template):
        if ts.settings_key(ts.function_props(template, fn)) == function:
            return str(fn)
    raise KeyError(f"no function {function!r} in template.yaml")


def physical(
    environment: Mapping[str, str], parameters: Mapping[str, str], function: str
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """(parameter values, {logical id: {"Ref": ..., "Arn": ..., "QueueName": ...}}) as the
    function's environment shows them: each TAGPIN_* variable the template sets to ``!Ref X``
    gives X; every other resource gets the name ``tagpin-<logical id>``."""
    ts = template_support()
    template = loaded_template()
    props = ts.function_props(template, function)
    params = dict(parameters)
    if "Condition" in template["Resources"][function]:  # the function exists: its condition holds
        holding(template, template["Resources"][function]["Condition"], params)
    attrs: dict[str, dict[str, str]] = {}
    kinds = {k: v["Type"] for k, v in template["Resources"].items()}
    for logical, kind in kinds.items():
        attrs[logical] = _attributes(kind, f"tagpin-{logical}")
    # the function itself, by the name the local runtime invokes it under (LocalContext)
    attrs[function] = _attributes("AWS::Serverless::Function", f"tagpin-{ts.settings_key(props)}")
    attrs[f"{function}Role"] = {
        "Ref": f"{function}Role",
        "Arn": make_arn("iam", "", ACCOUNT, f"role/{function}Role"),
    }
    for name, value in props.get("Environment", {}).get("Variables", {}).items():
        if isinstance(value, dict) and set(value) == {"Fn::If"} and name in environment:
            # set only under a condition (the consumer's TAGPIN_WRITEBACK_QUEUE_URL): carried, so the
            # condition held; a parameter it compares is taken to have the value that makes it so
            condition, value, _ = value["Fn::If"]
            holding(template, condition, params)
        if not (isinstance(value, dict) and set(value) == {"Ref"} and name in environment):
            continue
        ref, actual = value["Ref"], environment[name]
        if ref in template.get("Parameters", {}):
            params.setdefault(ref, actual)
        elif ref in kinds:
            attrs[ref] = _attributes(kinds[ref], actual)
    return params, attrs


def holding(template: Mapping[str, Any], condition: str, params: dict[str, str]) -> None:
    """A condition that holds (``Fn::Equals`` of a parameter and a value): the parameter, unless
    given, taken to have the value that makes it so."""
    test = template.get("Conditions", {}).get(condition, {})
    left, right = test.get("Fn::Equals", [None, None])
    if isinstance(left, dict) and set(left) == {"Ref"} and isinstance(right, str):
        params.setdefault(left["Ref"], right)


def _attributes(kind: str, physical: str) -> dict[str, str]:
    """Ref and GetAtt values of a resource whose Ref (name, URL or ARN) is ``physical``."""
    if kind == "AWS::DynamoDB::Table":
        return {"Ref": physical, "Arn": table_arn(physical, REGION)}
    if kind == "AWS::SQS::Queue":
        if "/" not in physical:
            physical = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{physical}"
        arn = queue_arn(physical, REGION)
        return {"Ref": physical, "Arn": arn, "QueueName": arn.rsplit(":", 1)[1]}
    if kind == "AWS::SNS::Topic":
        arn = physical if physical.startswith("arn:") else make_arn("sns", REGION, ACCOUNT, physical)
        return {"Ref": arn, "TopicArn": arn, "TopicName": arn.rsplit(":", 1)[1]}
    if kind == "AWS::Logs::LogGroup":
        return {"Ref": physical, "Arn": make_arn("logs", REGION, ACCOUNT, f"log-group:{physical}:*")}
    if kind == "AWS::Serverless::Function":
        return {"Ref": physical, "Arn": make_arn("lambda", REGION, ACCOUNT, f"function:{physical}")}
    return {"Ref": physical, "Arn": make_arn("unknown", REGION, ACCOUNT, physical)}


def resolve(value: Any, params: Mapping[str, Any], attrs: Mapping[str, Mapping[str, str]]) -> Any:
    """Ref, Fn::GetAtt and Fn::Sub (pseudo parameters, parameters, resources) to strings."""
    pseudo = {"AWS::Partition": PARTITION, "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}

    def name(ref: str) -> Any:
        if ref in pseudo:
            return pseudo[ref]
        if "." in ref:
            logical, attribute = ref.split(".", 1)
            return attrs[logical][attribute]
        return params[ref] if ref in params else attrs[ref]["Ref"]

    if isinstance(value, list):
        return [resolve(v, params, attrs) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        return name(value["Ref"])
    if set(value) == {"Fn::GetAtt"}:
        logical, attribute = value["Fn::GetAtt"]
        return attrs[logical][attribute]
    if set(value) == {"Fn::Sub"}:
        text, variables = (value["Fn::Sub"], {}) if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"]
        local = {k: resolve(v, params, attrs) for k, v in variables.items()}
        return re.sub(r"\$\{([^!}][^}]*)\}", lambda m: str(local.get(m[1]) or name(m[1])), text)
    return {k: resolve(v, params, attrs) for k, v in value.items()}


# What SAM attaches to a function's role besides its Policies (aws-sam-translator: _construct_role,
# the SQS event source's get_policy_arn, EventInvokeConfig destinations), as the AWS managed
# policies define them.
BASIC_EXECUTION = [
    {
        "Effect": "Allow",
        "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
        "Resource": "*",
    }
]
XRAY_WRITE = [
    {
        "Effect": "Allow",
        "Action": [
            "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
            "xray:GetSamplingTargets", "xray:GetSamplingStatisticSummaries",
        ],
        "Resource": "*",
    }
]  # fmt: skip
SQS_QUEUE_EXECUTION = [
    {
        "Effect": "Allow",
        "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
        "Resource": "*",
    },
    *BASIC_EXECUTION,
]


def role(function: str, environment: Mapping[str, str], parameters: Mapping[str, str] | None = None) -> Role:
    """The role of ``function`` (tagpin.settings name) for a parameter set (others: defaults), its
    resources named as ``environment`` (the TAGPIN_* variables) shows them."""
    return _role(function, tuple(sorted(environment.items())), tuple(sorted((parameters or {}).items())))


@cache
def _role(
    function: str, environment: tuple[tuple[str, str], ...], parameters: tuple[tuple[str, str], ...]
) -> Role:
    ts = template_support()
    template = loaded_template()
    fn = logical_id(function)
    params, attrs = physical(dict(environment), dict(parameters), fn)
    props = ts.function_props(template, fn)
    granted: list[Granted] = []
    own = ts.evaluated_statements(
        template, props, {k: v for k, v in params.items() if k in template["Parameters"]}
    )
    for index, statement in enumerate(own):
        resolved = resolve(statement, params, attrs)
        granted.append(Granted(str(statement.get("Sid") or f"#{index}"), resolved))
    granted += [Granted("AWSLambdaBasicExecutionRole", s, sam="every function") for s in BASIC_EXECUTION]
    if ts.evaluate(template, props.get("Tracing"), params) == "Active":
        granted += [Granted("AWSXrayWriteOnlyAccess", s, sam="Tracing: Active") for s in XRAY_WRITE]
    if ts.events_of_type(props, "SQS"):  # one managed policy, whatever the number of sources
        granted += [
            Granted("AWSLambdaSQSQueueExecutionRole", s, sam="an SQS event source")
            for s in SQS_QUEUE_EXECUTION
        ]
    for kind, destination in destinations(props, params, attrs):
        statement = {"Effect": "Allow", "Action": DESTINATION_ACTIONS[kind], "Resource": destination}
        granted.append(Granted("EventInvokeConfig destination", statement, sam=f"an {kind} destination"))
    # AWS::IAM::Policy resources attached to the function's role (PollerPartsPolicy), when created
    for logical, resource in template["Resources"].items():
        if (
            resource["Type"] != "AWS::IAM::Policy"
            or {"Ref": f"{fn}Role"} not in resource["Properties"]["Roles"]
        ):
            continue
        condition = resource.get("Condition")
        decided = {k: v for k, v in params.items() if k in template["Parameters"]}
        if condition is not None and not ts.evaluate(template, {"Condition": condition}, decided):
            continue
        document = ts.evaluate(template, resource["Properties"]["PolicyDocument"], decided)
        for index, statement in enumerate(ts.as_list(document["Statement"])):
            sid = f"{logical}.{statement.get('Sid') or index}"
            granted.append(Granted(sid, resolve(statement, params, attrs)))
    return Role(fn, tuple(granted), boundary(template, props, params, attrs))


def boundary(
    template: Mapping[str, Any],
    props: Mapping[str, Any],
    params: Mapping[str, Any],
    attrs: Mapping[str, Mapping[str, str]],
) -> tuple[Granted, ...] | None:
    """The statements of the function's ``PermissionsBoundary`` (``!Ref`` of the template's
    ``AWS::IAM::ManagedPolicy``), evaluated for the parameters; None when it has none."""
    ts = template_support()
    reference = props.get("PermissionsBoundary")
    if reference is None:
        return None
    policy = template["Resources"][reference["Ref"]]
    decided = {k: v for k, v in params.items() if k in template["Parameters"]}
    document = _no_values(ts.evaluate(template, policy["Properties"]["PolicyDocument"], decided))
    statements = ts.as_list(document["Statement"])
    return tuple(
        Granted(f"boundary.{s.get('Sid') or i}", resolve(s, params, attrs)) for i, s in enumerate(statements)
    )


def _no_values(value: Any) -> Any:
    """``value`` without the list items an ``Fn::If`` left as ``AWS::NoValue`` (CloudFormation
    drops them: a resource of the write-back's queue when it is not created)."""
    if isinstance(value, list):
        return [_no_values(v) for v in value if v != {"Ref": "AWS::NoValue"}]
    if isinstance(value, dict):
        return {k: _no_values(v) for k, v in value.items()}
    return value


# What Lambda calls with the function's role to deliver an invocation record, per destination type
# (SAM grants it: EventInvokeConfig's generated <Function>EventInvokeConfigOnFailure<Type>Policy).
DESTINATION_ACTIONS = {"SQS": "sqs:SendMessage", "SNS": "sns:Publish", "EventBridge": "events:PutEvents"}


def destinations(
    props: Mapping[str, Any], params: Mapping[str, Any], attrs: Mapping[str, Mapping[str, str]]
) -> list[tuple[str, str]]:
    config = props.get("EventInvokeConfig", {}).get("DestinationConfig", {})
    return [
        (d["Type"], resolve(d["Destination"], params, attrs)) for d in config.values() if "Destination" in d
    ]


# What SAM's managed policies grant that no call of a tagpin stack can use, and why it stays: SAM
# attaches AWSLambdaBasicExecutionRole to every role it makes (and AWSLambdaSQSQueueExecutionRole
# repeats it), and Lambda creates a function's log group only when it does not exist; the
# template creates each one (LoggingConfig.LogGroup).
UNUSABLE_SAM_GRANTS = frozenset({("logs:CreateLogGroup", "*")})


# --------------------------------------------------------------------------- verdicts
def denied(calls: Sequence[Call], parameters: Mapping[str, str] | None = None) -> list[str]:
    """Each call of a function's own role that its role does not allow (or that has no rule)."""
    problems = []
    for call in calls:
        if call.error is not None:
            problems.append(f"{call.function}: {call.operation}: {call.error}")
            continue
        if call.principal is not None:
            continue  # an assumed role's call: authorised by that role, in its account
        granted = role(call.function, dict(call.environment), parameters)
        for request in call.requests:
            if not granted.allowed(request):
                problems.append(
                    f"{call.function} ({granted.function}'s role) may not {request.action} "
                    f"on {request.resource} (called {call.operation})"
                )
    return problems


def unused(
    calls: Sequence[Call], functions: Sequence[str], parameters: Mapping[str, str] | None = None
) -> list[str]:
    """Each action x resource of each statement of each role that no call allows: the template's
    own, the policies attached to the role (PollerPartsPolicy), and what SAM adds (its managed
    policies, the destination's) but ``UNUSABLE_SAM_GRANTS``."""
    problems = []
    for function in functions:
        mine = [c for c in calls if c.function == function and c.principal is None and c.error is None]
        environments = {c.environment for c in mine} or {()}
        seen: set[tuple[str, str, str]] = set()
        used: set[tuple[str, str, str]] = set()
        for environment in environments:
            granted = role(function, dict(environment), parameters)
            requests = [r for c in mine if c.environment == environment for r in c.requests]
            for g in granted.statements:
                for action in as_list(g.statement.get("Action", [])):
                    for resource in as_list(g.statement.get("Resource", [])):
                        if g.sam is not None and (action, resource) in UNUSABLE_SAM_GRANTS:
                            continue
                        part = Statement(
                            {"Effect": g.statement["Effect"], "Action": action, "Resource": resource}
                        )
                        key = (g.sid, str(action), str(resource))
                        seen.add(key)
                        if any(
                            part.permits(r.action, r.resource) is PermissionResult.PERMITTED for r in requests
                        ):
                            used.add(key)
        fn = logical_id(function)
        problems += [
            f"{fn} {sid}: {action} on {resource} is allowed but no call uses it"
            for sid, action, resource in sorted(seen - used)
        ]
    return problems


def report(calls: Sequence[Call]) -> str:
    """Calls per function and operation, for the session summary."""
    counts: dict[str, dict[str, int]] = {}
    for call in calls:
        ops = counts.setdefault(call.function + (f" as {call.principal}" if call.principal else ""), {})
        ops[call.operation] = ops.get(call.operation, 0) + 1
    return json.dumps(counts, indent=1, sort_keys=True)
