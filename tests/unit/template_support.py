"""Reading template.yaml for the template tests: one copy of every helper they share.

The template is read as written (CloudFormation short tags in their long form), with the function
Globals applied the way SAM applies them, intrinsic functions evaluated for a parameter set, and
every function policy expanded to IAM statements (inline documents and SAM policy templates).
"""

from __future__ import annotations

import copy
import re
from fnmatch import fnmatchcase
from typing import Any

import pytest
from tagpin.settings import NEEDS
from tagpin_local import cfn

from tests.support.constants import ROOT

TEMPLATE = ROOT / "template.yaml"

# Actions that cannot be scoped to a resource ARN: the only ones allowed with Resource "*".
UNSCOPABLE_ACTIONS = frozenset(
    {
        "ecr:GetAuthorizationToken",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "sts:GetCallerIdentity",
    }
)


# --------------------------------------------------------------------------- loading
def load_template() -> dict[str, Any]:
    """template.yaml, its short tags in their long form (tagpin_local.cfn: the one loader)."""
    return cfn.load_template(TEMPLATE)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    """The loaded template (import this fixture into a test module)."""
    return load_template()


def resources(template: dict[str, Any]) -> dict[str, Any]:
    res = template["Resources"]
    assert isinstance(res, dict)
    return res


def function_ids(template: dict[str, Any]) -> list[str]:
    """Logical ids of every ``AWS::Serverless::Function``, in template order."""
    return [k for k, v in resources(template).items() if v["Type"] == "AWS::Serverless::Function"]


def function_props(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    """Function properties with Globals.Function applied as SAM does.

    Scalars on the resource win, maps are merged (resource keys win), lists are
    concatenated (globals first), except those SAM replaces (Architectures).
    """
    resource = resources(template)[logical_id]
    assert resource["Type"] == "AWS::Serverless::Function"
    merged: dict[str, Any] = copy.deepcopy(template.get("Globals", {}).get("Function", {}))
    result: dict[str, Any] = _merge(merged, copy.deepcopy(resource["Properties"]))
    return result


# aws-sam-translator's globals merge: these lists are replaced by the function's, not appended to.
_REPLACED = frozenset({"Architectures"})


def _merge(base: Any, override: Any, path: str = "") -> Any:
    if isinstance(base, dict) and isinstance(override, dict) and not _is_intrinsic(override):
        out = dict(base)
        for key, value in override.items():
            inner = f"{path}.{key}".lstrip(".")
            out[key] = _merge(base[key], value, inner) if key in base else value
        return out
    if isinstance(base, list) and isinstance(override, list) and path not in _REPLACED:
        return base + override
    return override


def _is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref"))


def settings_key(props: dict[str, Any]) -> str | None:
    """The function's name in ``tagpin.settings.NEEDS``: its POWERTOOLS_SERVICE_NAME, else the
    ``<name>`` of its CodeUri ``functions/<name>/``; None when neither is a key of NEEDS."""
    service = props.get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME")
    match = re.fullmatch(r"functions/([^/]+)/", str(props.get("CodeUri", "")))
    for candidate in (service, match.group(1) if match else None):
        if candidate in NEEDS:
            return str(candidate)
    return None


# --------------------------------------------------------------------------- intrinsic functions
def evaluate(template: dict[str, Any], value: Any, params: dict[str, str]) -> Any:
    """Evaluate Ref (parameters), Fn::If/Not/Equals/And/Or/Join/Contains and Condition for a parameter set."""
    parameters = template.get("Parameters", {})
    conditions = template.get("Conditions", {})

    def ev(v: Any) -> Any:
        if isinstance(v, dict) and len(v) == 1:
            ((key, arg),) = v.items()
            if key == "Ref" and arg in parameters:
                value = params.get(arg, parameters[arg].get("Default"))
                if parameters[arg]["Type"] == "CommaDelimitedList":
                    return str(value).split(",")
                # CloudFormation hands every parameter value over as a string (a Number's too):
                # Fn::Equals [!Ref ConsumerReservedConcurrency, "0"] compares strings
                return str(value) if parameters[arg]["Type"] == "Number" else value
            if key == "Fn::Join":
                return str(arg[0]).join(str(x) for x in ev(arg[1]))
            if key == "Condition":
                return bool(ev(conditions[arg]))
            if key == "Fn::Equals":  # CloudFormation compares scalars as strings ("1" == 1)
                left, right = ev(arg[0]), ev(arg[1])
                if isinstance(left, int | float | str) and isinstance(right, int | float | str):
                    return str(left) == str(right)
                return left == right
            if key == "Fn::Not":
                return not ev(arg[0])
            if key == "Fn::Contains":  # a Rules function: the list holds the string
                return str(ev(arg[1])) in [str(x) for x in ev(arg[0])]
            if key == "Fn::And":
                return all(ev(a) for a in arg)
            if key == "Fn::Or":
                return any(ev(a) for a in arg)
            if key == "Fn::If":
                name, then, other = arg
                return ev(then) if ev(conditions[name]) else ev(other)
        if isinstance(v, dict):
            return {k: ev(x) for k, x in v.items()}
        if isinstance(v, list):
            return [ev(x) for x in v]
        return v

    return ev(value)


def references(value: Any) -> set[str]:
    """Logical ids and parameters ``value`` names: Ref, Fn::GetAtt and ``${...}`` in Fn::Sub
    (pseudo parameters and a Sub's own variables left out)."""
    if isinstance(value, list):
        return {name for item in value for name in references(item)}
    if not isinstance(value, dict):
        return set()
    if set(value) == {"Ref"}:
        return set() if str(value["Ref"]).startswith("AWS::") else {str(value["Ref"])}
    if set(value) == {"Fn::GetAtt"}:
        return {str(value["Fn::GetAtt"][0])}
    if set(value) == {"Fn::Sub"}:
        text, variables = (value["Fn::Sub"], {}) if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"]
        named = {m.split(".", 1)[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", text)}
        return {n for n in named if not n.startswith("AWS::") and n not in variables} | references(
            list(variables.values())
        )
    return references(list(value.values()))


# --------------------------------------------------------------------------- events
def events_of_type(props: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e["Properties"] for e in props.get("Events", {}).values() if e["Type"] == kind]


# Event sources that invoke a function asynchronously: Lambda retries it, then hands the failure to
# its EventInvokeConfig destination. The others (HttpApi, SQS) invoke it synchronously.
ASYNCHRONOUS_SOURCES = frozenset(
    {"Schedule", "ScheduleV2", "EventBridgeRule", "CloudWatchEvent", "SNS", "S3"}
)


def invoked_asynchronously(template: dict[str, Any], logical: str) -> bool:
    """An event source that invokes the function asynchronously, or ``lambda:InvokeFunction`` on it
    in one of the template's own policies (the poller's parts: asynchronous invocations of itself)."""
    kinds = {e["Type"] for e in (function_props(template, logical).get("Events") or {}).values()}
    invoked = any(
        "lambda:InvokeFunction" in str(s.get("Action"))
        and s.get("Resource") == {"Fn::GetAtt": [logical, "Arn"]}
        for r in resources(template).values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in as_list(r["Properties"]["PolicyDocument"]["Statement"])
    )
    return bool(kinds & ASYNCHRONOUS_SOURCES) or invoked


def rule_enabled(event: dict[str, Any]) -> bool:
    if "State" in event:
        return bool(event["State"] == "ENABLED")
    return bool(event.get("Enabled", True))


# --------------------------------------------------------------------------- IAM
def _table_arns(param: str) -> list[dict[str, Any]]:
    table = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${tableName}"
    return [{"Fn::Sub": [arn, {"tableName": {"Ref": param}}]} for arn in (table, table + "/index/*")]


def _sub(arn: str, variable: str, param: str) -> dict[str, Any]:
    return {"Fn::Sub": [arn, {variable: {"Ref": param}}]}


_REGIONAL = "arn:${AWS::Partition}:%s:${AWS::Region}:${AWS::AccountId}:%s"
_SSM_DESCRIBE = {"Effect": "Allow", "Action": ["ssm:DescribeParameters"], "Resource": "*"}
_SSM_READ = ["ssm:GetParameters", "ssm:GetParameter", "ssm:GetParametersByPath"]
_SSM_PARAMETER = _REGIONAL % ("ssm", "parameter%s${parameterName}")

# SAM policy templates, as aws-sam-translator's policy_templates.json defines them (checked against
# its 1.115.0): {"Name": {"Param": value}} in Policies grants these statements, {"Ref": "Param"}
# replaced by the value. A template not listed here fails the IAM check until it is added.
SAM_POLICY_TEMPLATES: dict[str, list[dict[str, Any]]] = {
    "DynamoDBCrudPolicy": [
        {
            "Effect": "Allow",
            "Action": [
                "dynamodb:GetItem", "dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:Scan",
                "dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem",
                "dynamodb:BatchGetItem", "dynamodb:DescribeTable", "dynamodb:ConditionCheckItem",
            ],
            "Resource": _table_arns("TableName"),
        }
    ],
    "DynamoDBReadPolicy": [
        {
            "Effect": "Allow",
            "Action": [
                "dynamodb:GetItem", "dynamodb:Scan", "dynamodb:Query", "dynamodb:BatchGetItem",
                "dynamodb:DescribeTable",
            ],
            "Resource": _table_arns("TableName"),
        }
    ],
    "DynamoDBWritePolicy": [
        {
            "Effect": "Allow",
            "Action": ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem"],
            "Resource": _table_arns("TableName"),
        }
    ],
    "SQSSendMessagePolicy": [
        {
            "Effect": "Allow",
            "Action": ["sqs:SendMessage*"],
            "Resource": _sub(_REGIONAL % ("sqs", "${queueName}"), "queueName", "QueueName"),
        }
    ],
    "SQSPollerPolicy": [
        {
            "Effect": "Allow",
            "Action": [
                "sqs:ChangeMessageVisibility", "sqs:ChangeMessageVisibilityBatch", "sqs:DeleteMessage",
                "sqs:DeleteMessageBatch", "sqs:GetQueueAttributes", "sqs:ReceiveMessage",
            ],
            "Resource": _sub(_REGIONAL % ("sqs", "${queueName}"), "queueName", "QueueName"),
        }
    ],
    "SSMParameterReadPolicy": [
        _SSM_DESCRIBE,
        {
            "Effect": "Allow",
            "Action": _SSM_READ,
            "Resource": _sub(_SSM_PARAMETER % "/", "parameterName", "ParameterName"),
        },
    ],
    "SSMParameterWithSlashPrefixReadPolicy": [
        _SSM_DESCRIBE,
        {
            "Effect": "Allow",
            "Action": _SSM_READ,
            "Resource": _sub(_SSM_PARAMETER % "", "parameterName", "ParameterName"),
        },
    ],
    "SNSPublishMessagePolicy": [
        {
            "Effect": "Allow",
            "Action": ["sns:Publish"],
            "Resource": _sub(_REGIONAL % ("sns", "${topicName}"), "topicName", "TopicName"),
        }
    ],
    "AWSSecretsManagerGetSecretValuePolicy": [
        {
            "Effect": "Allow",
            "Action": ["secretsmanager:GetSecretValue"],
            "Resource": _sub("${secretArn}", "secretArn", "SecretArn"),
        }
    ],
    "KMSDecryptPolicy": [
        {
            "Effect": "Allow",
            "Action": "kms:Decrypt",
            "Resource": _sub(_REGIONAL % ("kms", "key/${keyId}"), "keyId", "KeyId"),
        }
    ],
    "EKSDescribePolicy": [
        {"Effect": "Allow", "Action": ["eks:DescribeCluster", "eks:ListClusters"], "Resource": "*"}
    ],
}  # fmt: skip


def _sam_template_statements(name: str, arguments: Any) -> list[dict[str, Any]]:
    assert name in SAM_POLICY_TEMPLATES, (
        f"SAM policy template {name} is not known to the template test: add its statements to "
        "tests/unit/template_support.py SAM_POLICY_TEMPLATES"
    )
    arguments = arguments if isinstance(arguments, dict) else {}

    def substitute(v: Any) -> Any:
        if isinstance(v, dict) and set(v) == {"Ref"} and v["Ref"] in arguments:
            return copy.deepcopy(arguments[v["Ref"]])
        if isinstance(v, dict):
            return {k: substitute(x) for k, x in v.items()}
        if isinstance(v, list):
            return [substitute(x) for x in v]
        return v

    return [substitute(s) for s in SAM_POLICY_TEMPLATES[name]]


def _branches(value: Any) -> list[Any]:
    """Both branches of an Fn::If (recursively), AWS::NoValue dropped."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        return [b for branch in value["Fn::If"][1:] for b in _branches(branch)]
    return [] if value == {"Ref": "AWS::NoValue"} else [value]


def policy_statements(props: dict[str, Any]) -> list[dict[str, Any]]:
    """Every IAM statement a function's Policies grant, both branches of Fn::If included: inline
    policy documents, and SAM policy templates expanded. A managed policy (a name or an ARN) fails:
    its statements cannot be checked here."""
    out: list[dict[str, Any]] = []
    for entry in as_list(props.get("Policies", [])):
        for policy in _branches(entry):
            assert isinstance(policy, dict), f"managed policy {policy!r}: use inline statements"
            if "Statement" in policy:
                for stmt in as_list(policy["Statement"]):
                    out.extend(s for s in _branches(stmt) if isinstance(s, dict))
            else:
                for name, arguments in policy.items():
                    out.extend(_sam_template_statements(name, arguments))
    return out


def evaluated_statements(
    template: dict[str, Any], props: dict[str, Any], params: dict[str, str]
) -> list[Any]:
    """The statements granted for a parameter set (conditions decided, parameters substituted)."""
    return policy_statements({"Policies": evaluate(template, props.get("Policies", []), params)})


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def actions_of(props: dict[str, Any]) -> set[str]:
    return {a for s in policy_statements(props) if s["Effect"] == "Allow" for a in as_list(s["Action"])}


def grants(stmt: dict[str, Any], action: str) -> bool:
    """Whether a statement's Action names ``action`` (IAM wildcards such as ``sqs:SendMessage*`` too)."""
    return any(fnmatchcase(action, pattern) for pattern in as_list(stmt.get("Action", [])))


def statements_for(props: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in policy_statements(props) if grants(s, action)]


# Every function of the template, by logical id (a new function is checked without editing the tests).
FUNCTIONS: tuple[str, ...] = tuple(function_ids(load_template()))
