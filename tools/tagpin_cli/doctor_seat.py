"""What every ``tagpin doctor`` check shares: where the doctor sits (:class:`Seat`), what a check
returns (:class:`Result`, :class:`Status`), the report, which functions read what, and two helpers.
The checks (``doctor_*.py``) import these from here, and ``tagpin_cli.doctor`` runs the checks: no
module of the doctor imports the one that imports it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from tagpin_cli.environment import Stack

FUNCTIONS = ("poller", "webhook", "consumer", "reconciler", "console")
# Deployed with a parameter only: the console with ConsoleJwtIssuer (its output is there then).
OPTIONAL_FUNCTIONS = ("console",)
# resolve tags with the registry's credentials; the consumer reads manifests and signatures (trust gates)
REGISTRY_READERS = ("poller", "webhook", "reconciler", "consumer")
CLUSTER_READERS = ("consumer", "reconciler")  # reach clusters
NOTIFIERS = ("consumer", "reconciler", "console")  # the reconciler: holds; the console: decisions, Slack
SIGNATURE_READERS = ("consumer",)  # signature gates' keys and trusted roots


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Result:
    check: str  # stack, functions, configuration, secret, registry, cluster, permissions, webhook, ...
    subject: str  # what was checked: a secret's name, a registry host, a cluster, a function
    status: Status
    detail: str
    fix: str = ""


@dataclass
class Seat:
    """Where the doctor sits, and what the checks so far learned."""

    stack: Stack
    config: Any = None  # TagpinConfig once the configuration check passed
    followed: list[Any] = field(default_factory=list)  # FollowedImage: configuration + index
    roles: dict[str, str] = field(default_factory=dict)  # function -> IAM role ARN (AWS)
    stack_id: str = ""

    @property
    def local(self) -> bool:
        return self.stack.local


@dataclass
class Report:
    stack: str
    local: bool
    results: list[Result]
    missing_stack: bool = False

    def count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status is status)

    def exit_code(self, strict: bool = False) -> int:
        if self.missing_stack:
            return 3  # main.EXIT_ENVIRONMENT
        failed = self.count(Status.FAIL) + (self.count(Status.WARN) if strict else 0)
        return 1 if failed else 0  # main.EXIT_FAILED

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "local": self.local,
            "ok": self.count(Status.FAIL) == 0 and not self.missing_stack,
            "summary": {s.value: self.count(s) for s in Status},
            "checks": [asdict(r) | {"status": r.status.value} for r in self.results],
        }


Check = Callable[[Seat], list[Result]]


def short(exc: BaseException) -> str:
    """An error in one line for a detail column: its type and its first 300 characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"


def allowed_by_iam(role_arn: str, action: str, resource: str) -> bool:
    """IAM's policy simulator (``iam:SimulatePrincipalPolicy``): may ``role_arn`` do ``action`` on
    ``resource``? (Its identity policies: a resource's own policy is not part of the answer.)"""
    from tagpin import wiring

    evaluation = wiring.aws("iam").simulate_principal_policy(
        PolicySourceArn=role_arn, ActionNames=[action], ResourceArns=[resource]
    )["EvaluationResults"]
    return bool(evaluation) and evaluation[0].get("EvalDecision") == "allowed"
