"""Price: the template's defaults the monthly model runs at, read from template.yaml.

Schedules, memory sizes, alarm count, log retention and the secret store.
"""

from __future__ import annotations

from typing import Any

import yaml

from . import ROOT


class _CfnLoader(yaml.SafeLoader):
    pass


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _any_tag)  # type: ignore[no-untyped-call]


def rate_minutes(expression: str) -> float:
    """Minutes between runs of a ``rate(N unit)`` expression."""
    value, unit = expression.removeprefix("rate(").removesuffix(")").split()
    factor = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}[unit]
    return float(value) * factor


def template_defaults() -> dict[str, Any]:
    doc = yaml.load((ROOT / "template.yaml").read_text(), Loader=_CfnLoader)
    params = doc["Parameters"]
    resources = doc["Resources"]
    default_memory = doc["Globals"]["Function"]["MemorySize"]
    memory = {
        name.removesuffix("Function").lower(): r["Properties"].get("MemorySize", default_memory)
        for name, r in resources.items()
        if r["Type"] == "AWS::Serverless::Function"
    }
    return {
        "poll_schedule": params["PollSchedule"]["Default"],
        "reconcile_schedule": params["ReconcileSchedule"]["Default"],
        "memory_mb": memory,
        "architecture": doc["Globals"]["Function"]["Architectures"][0],
        # at the defaults: the alarms under a condition (DetailedMonitoring's) are not created
        "alarms": sum(
            r["Type"] == "AWS::CloudWatch::Alarm" and "Condition" not in r for r in resources.values()
        ),
        "detailed_monitoring": str(params["DetailedMonitoring"]["Default"]).lower() == "true",
        "log_retention_days": params["LogRetentionInDays"]["Default"],
        "log_groups": sum(r["Type"] == "AWS::Logs::LogGroup" for r in resources.values()),
        "secret_store": params["SecretStore"]["Default"],
    }
