"""``tagpin doctor``: check a stack end to end, read-only, and say what to fix.

Each check is a small function of the :class:`Seat` (where the doctor sits: the stack, what it
learned so far) returning :class:`Result` s: a name, a subject, ok / warn / fail / skip, a detail
and what to fix. Nothing is written anywhere: no state, no queue, no secret, no workload; the
webhook gets an unauthenticated POST, which it must refuse (401) before reading anything.

What is decided where (docs/troubleshooting.md, "tagpin doctor"):

- stack: the outputs (AWS) or the endpoints file (local); the state table and the queues answer.
- functions (AWS only): each function is active, its last update succeeded and its environment
  has every ``TAGPIN_*`` variable it needs (``tagpin.settings.NEEDS``). Locally the handlers run
  in-process with the local stack's environment: skipped.
- lambda (AWS only): the consumer's recursive loop setting and concurrency: see
  :mod:`tagpin_cli.doctor_lambda`.
- configuration: the SSM parameter exists and validates; the followed tags (configuration and
  the reconciler's index of labelled workloads).
- secrets: each secret exists, is readable and has its reader's shape, and each reader's role may
  read it: see :mod:`tagpin_cli.doctor_secrets`.
- registries: one followed tag per registry resolved with its credentials, and each cross-account
  ECR role assumable by the functions: see :mod:`tagpin_cli.doctor_registries`.
- clusters: see :mod:`tagpin_cli.doctor_clusters`.
- gitops: each followed workload Argo CD or Flux owns, its owner and what is configured for it
  (written back through Git, patched live by choice, or nothing: what to configure): see
  :mod:`tagpin_cli.doctor_gitops`.
- webhook, console, slack: what a stranger reaches (401 without credentials): see
  :mod:`tagpin_cli.doctor_http`.
- alarms, dead letters: the alarm topic has a confirmed subscription; the dead-letter queue is
  empty, and so is the queue of undelivered events: see :mod:`tagpin_cli.doctor_alarms`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tagpin_cli.doctor_seat import (  # the checks' shared words
    FUNCTIONS,
    OPTIONAL_FUNCTIONS,
    Check,
    Report,
    Result,
    Seat,
    Status,
    short,
)
from tagpin_cli.environment import Stack
from tagpin_cli.output import inert


# -- the checks ----------------------------------------------------------------------------------
def check_stack(seat: Seat) -> list[Result]:
    from tagpin import wiring

    t = seat.stack
    found: list[str] = []
    if seat.local:
        where = f"local stack (AWS endpoint {t.aws_endpoint})"
    else:
        described = wiring.aws("cloudformation").describe_stacks(StackName=t.name)["Stacks"][0]
        seat.stack_id = described.get("StackId", "")
        state = str(described.get("StackStatus", ""))
        required = [f for f in FUNCTIONS if f not in OPTIONAL_FUNCTIONS]
        wanted = ("WebhookUrl", "AlarmTopicArn", *(f"{f.capitalize()}FunctionName" for f in required))
        missing = [k for k in wanted if k not in t.outputs]
        if missing or not state.endswith("_COMPLETE") or "ROLLBACK" in state:
            return [
                Result(
                    "stack",
                    t.name,
                    Status.FAIL,
                    f"status {state}" + (f"; outputs missing: {', '.join(missing)}" if missing else ""),
                    "deploy the current template: make build && sam deploy (docs/deploying.md)",
                )
            ]
        where = f"stack {t.name} ({state}, {len(t.outputs)} outputs)"
        seat.roles = _roles(t.name, seat.stack_id)
    table = wiring.aws("dynamodb").describe_table(TableName=t.state_table)["Table"]
    found.append(f"table {t.state_table} {table.get('TableStatus', '?')}")
    sqs = wiring.aws("sqs")
    for url in (t.queue_url, t.dead_letter_queue_url):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    found.append("changes queue and its dead-letter queue answer")
    return [Result("stack", t.name, Status.OK, f"{where}: " + "; ".join(found))]


def _roles(stack: str, stack_id: str) -> dict[str, str]:
    """Each function's IAM role ARN, from the stack's resources (SAM names them <Function>Role)."""
    from tagpin import wiring

    parts = stack_id.split(":")  # arn:<partition>:cloudformation:<region>:<account>:stack/...
    if len(parts) < 5:
        return {}
    partition, account = parts[1], parts[4]
    resources = wiring.aws("cloudformation").describe_stack_resources(StackName=stack)["StackResources"]
    by_id = {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in resources}
    return {
        f: f"arn:{partition}:iam::{account}:role/{by_id[key]}"
        for f in FUNCTIONS
        if (key := f"{f.capitalize()}FunctionRole") in by_id and by_id[key]
    }


def check_functions(seat: Seat) -> list[Result]:
    from tagpin import wiring
    from tagpin.settings import CONFIG, NEEDS, OPTIONAL, variable

    if seat.local:
        return [
            Result(
                "functions",
                "all",
                Status.SKIP,
                "the local stack runs the handlers in-process with its own environment",
            )
        ]
    results = []
    for function in FUNCTIONS:
        name = seat.stack.outputs.get(f"{function.capitalize()}FunctionName", "")
        if not name and function in OPTIONAL_FUNCTIONS:
            results.append(
                Result("functions", function, Status.SKIP, "not deployed (ConsoleJwtIssuer is empty)")
            )
            continue
        conf = wiring.aws("lambda").get_function_configuration(FunctionName=name)
        env = (conf.get("Environment") or {}).get("Variables") or {}
        missing = [
            variable(n) if n != CONFIG else variable("config_parameter")
            for n in NEEDS[function]
            if n not in OPTIONAL
            and not (
                env.get(variable("config_parameter")) or env.get(variable("config_file"))
                if n == CONFIG
                else env.get(variable(n))
            )
        ]
        state, update = conf.get("State", "Active"), conf.get("LastUpdateStatus", "Successful")
        if missing or state != "Active" or update == "Failed":
            problem = f"state {state}, last update {update}" + (
                f"; environment lacks {', '.join(missing)}" if missing else ""
            )
            results.append(
                Result("functions", function, Status.FAIL, problem, "redeploy the stack (sam deploy)")
            )
        else:
            results.append(Result("functions", function, Status.OK, f"{name}: active, environment complete"))
    return results


def check_configuration(seat: Seat) -> list[Result]:
    from tagpin import wiring
    from tagpin.domain.config import ConfigError, NotConfigured

    parameter = seat.stack.config_parameter
    push = f"tagpin config validate FILE && tagpin config push FILE (parameter {parameter})"
    try:
        config = wiring.config()
    except NotConfigured as exc:
        return [Result("configuration", parameter, Status.FAIL, str(exc), push)]
    except ConfigError as exc:
        return [Result("configuration", parameter, Status.FAIL, f"invalid: {exc}", push)]
    seat.config = config
    configured = {t.id for f in config.images for t in f.targets}
    try:
        seat.followed = sorted(wiring.followed().values(), key=lambda f: f.image)
    except Exception as exc:
        seat.followed = list(config.images)
        return [
            Result(
                "configuration",
                parameter,
                Status.WARN,
                f"valid, but the index of labelled workloads could not be read: {short(exc)}",
                "check the state table (the stack check)",
            )
        ]
    labelled = {t.id for f in seat.followed for t in f.targets} - configured
    detail = (
        f"valid: {len(config.clusters)} cluster(s), {len(config.registries)} registry setting(s), "
        f"{len(seat.followed)} followed tag(s), {len(configured)} configured target(s), "
        f"{len(labelled)} labelled target(s)"
    )
    if not seat.followed:
        return [
            Result(
                "configuration",
                parameter,
                Status.WARN,
                detail + ": nothing is followed",
                "list images in the configuration, or label workloads tagpin.dev/follow=true "
                "(docs/clusters.md)",
            )
        ]
    return [Result("configuration", parameter, Status.OK, detail)]


# -- running and rendering -------------------------------------------------------------------------
def checks() -> list[tuple[str, Check, bool]]:
    """(name, check, needs the configuration), in order."""
    from tagpin_cli.doctor_alarms import check_alarms, check_dead_letters
    from tagpin_cli.doctor_clusters import check_clusters
    from tagpin_cli.doctor_gitops import check_gitops
    from tagpin_cli.doctor_http import check_console, check_slack, check_webhook
    from tagpin_cli.doctor_lambda import check_lambda
    from tagpin_cli.doctor_registries import check_registries
    from tagpin_cli.doctor_secrets import check_secrets

    return [
        ("stack", check_stack, False),
        ("functions", check_functions, False),
        ("lambda", check_lambda, False),
        ("configuration", check_configuration, False),
        ("secret", check_secrets, True),
        ("registry", check_registries, True),
        ("cluster", check_clusters, True),
        ("gitops", check_gitops, True),
        ("webhook", check_webhook, False),
        ("console", check_console, False),
        ("slack", check_slack, True),
        ("alarms", check_alarms, False),
        ("dead letters", check_dead_letters, False),
    ]


def run(stack: Stack, only: Iterable[str] | None = None) -> Report:
    seat = Seat(stack)
    results: list[Result] = []
    wanted = set(only) if only else None
    stack_failed = False
    for name, check, needs_config in checks():
        if wanted is not None and name not in wanted and name != "configuration":
            continue
        if stack_failed and name != "stack":
            results.append(Result(name, "-", Status.SKIP, "needs the stack"))
            continue
        if needs_config and seat.config is None:
            results.append(Result(name, "-", Status.SKIP, "needs a valid configuration"))
            continue
        try:
            found = check(seat)
        except Exception as exc:  # a check that cannot run is a failure, never a traceback
            found = [Result(name, "-", Status.FAIL, f"could not check: {short(exc)}", "run again with -v")]
        results.extend(found)
        stack_failed = stack_failed or (name == "stack" and any(r.status is Status.FAIL for r in found))
    return Report(stack.name, stack.local, results)


def not_found(message: str, local: bool) -> Report:
    fix = "start it: tagpin local" if local else "give --stack NAME and --region, or set TAGPIN_STACK"
    results = [Result("stack", "-", Status.FAIL, message, fix)]
    results += [Result(name, "-", Status.SKIP, "needs the stack") for name, _, _ in checks()[1:]]
    return Report("local" if local else "?", local, results, missing_stack=True)


_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def render(report: Report, console: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    title = Text(f"tagpin doctor: {'local stack' if report.local else inert(report.stack)}")
    table = Table(title=title, show_lines=True)
    for column in ("check", "subject", "status", "detail", "what to fix"):
        table.add_column(column, overflow="fold")
    for r in report.results:  # a detail quotes what a registry, a cluster or a URL answered: inert
        table.add_row(
            r.check,
            Text(inert(r.subject)),
            Text(r.status.value, style=_STYLE[r.status]),
            Text(inert(r.detail)),
            Text(inert(r.fix)),
        )
    console.print(table)
    summary = ", ".join(f"{report.count(s)} {s.value}" for s in Status)
    console.print(f"{summary}: " + ("all checks passed" if report.exit_code() == 0 else "see what to fix"))
