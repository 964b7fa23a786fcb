"""Price: the template's defaults the monthly model runs at, read from template.yaml.

Schedules, memory sizes, the alarms created at the parameters' defaults (their conditions
evaluated), the queues Lambda's event sources poll (and their types), log retention and the secret store.
"""

from __future__ import annotations

from typing import Any

from tagpin_local.cfn import load_template

from . import ROOT


def rate_minutes(expression: str) -> float:
    """Minutes between runs of a ``rate(N unit)`` expression."""
    value, unit = expression.removeprefix("rate(").removesuffix(")").split()
    factor = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}[unit]
    return float(value) * factor


def _holds(condition: Any, conditions: dict[str, Any], params: dict[str, Any]) -> bool:
    """A template condition's value at the parameters' defaults (Equals, Not, And, Or, Condition)."""
    if isinstance(condition, dict) and len(condition) == 1:
        ((key, value),) = condition.items()
        if key == "Condition":
            return _holds(conditions[value], conditions, params)
        if key == "Fn::Not":
            return not _holds(value[0], conditions, params)
        if key == "Fn::And":
            return all(_holds(v, conditions, params) for v in value)
        if key == "Fn::Or":
            return any(_holds(v, conditions, params) for v in value)
        if key == "Fn::Equals":
            left, right = (_value(v, params) for v in value)
            return str(left) == str(right)
    raise ValueError(f"cannot evaluate the condition {condition!r}")


def _value(value: Any, params: dict[str, Any], conditions: dict[str, Any] | None = None) -> Any:
    if isinstance(value, dict) and set(value) == {"Fn::If"} and conditions is not None:
        name, then, otherwise = value["Fn::If"]
        return _value(then if _holds(conditions[name], conditions, params) else otherwise, params, conditions)
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return params[value["Ref"]]
    if isinstance(value, dict) and set(value) == {"Fn::Join"}:
        separator, items = value["Fn::Join"]
        return separator.join(str(v) for v in _value(items, params))
    return value


def template_defaults() -> dict[str, Any]:
    doc = load_template(ROOT / "template.yaml")
    params = doc["Parameters"]
    resources = doc["Resources"]
    values = {name: p.get("Default", "") for name, p in params.items()}

    def created(resource: dict[str, Any]) -> bool:
        name = resource.get("Condition")
        return name is None or _holds(doc["Conditions"][name], doc["Conditions"], values)

    default_memory = doc["Globals"]["Function"]["MemorySize"]
    memory = {
        name.removesuffix("Function").lower(): r["Properties"].get("MemorySize", default_memory)
        for name, r in resources.items()
        if r["Type"] == "AWS::Serverless::Function"
    }
    consumed = {
        queue: "fifo" if _fifo(resources[queue]) else "standard"
        for r in resources.values()
        if r["Type"] == "AWS::Serverless::Function" and created(r)
        for event in (r["Properties"].get("Events") or {}).values()
        if event["Type"] == "SQS"
        for queue in [_queue_name(event["Properties"]["Queue"])]
    }
    return {
        "poll_schedule": params["PollSchedule"]["Default"],
        "reconcile_schedule": params["ReconcileSchedule"]["Default"],
        "memory_mb": memory,
        "architecture": doc["Globals"]["Function"]["Architectures"][0],
        "tracing": _value(
            doc["Globals"]["Function"].get("Tracing", "PassThrough"), values, doc["Conditions"]
        ),
        # the alarms created at the parameters' defaults
        "alarms": sum(r["Type"] == "AWS::CloudWatch::Alarm" and created(r) for r in resources.values()),
        # the queues Lambda's event sources poll around the clock, idle or not, and their types
        "consumed_queues": len(consumed),
        "consumed_queue_types": consumed,
        "detailed_monitoring": str(params["DetailedMonitoring"]["Default"]).lower() == "true",
        "log_retention_days": params["LogRetentionInDays"]["Default"],
        "log_groups": sum(r["Type"] == "AWS::Logs::LogGroup" for r in resources.values()),
        "secret_store": params["SecretStore"]["Default"],
    }


def _queue_name(queue: Any) -> str:
    """The logical id of the queue an SQS event source reads (``!GetAtt Name.Arn``)."""
    if isinstance(queue, dict) and set(queue) == {"Fn::GetAtt"}:
        attribute = queue["Fn::GetAtt"]
        return str(attribute[0] if isinstance(attribute, list) else attribute.split(".")[0])
    raise ValueError(f"an SQS event source's queue is not a !GetAtt of the template's queue: {queue!r}")


def _fifo(resource: dict[str, Any]) -> bool:
    """A queue's type as created (``FifoQueue``; standard when absent)."""
    return str(resource.get("Properties", {}).get("FifoQueue", False)).lower() == "true"
