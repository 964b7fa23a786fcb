"""Each command as a person runs it: the arguments in, ``tagpin_cli.commands`` called, its data
printed (``tagpin_cli.output``), the exit code out. An error in what the person typed (an unknown
target, image or channel, a malformed time or policy) is exit 2 with one line on stderr."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tagpin_cli import output
from tagpin_cli.environment import Stack, StackNotFound
from tagpin_cli.output import EXIT_CHANGES, EXIT_FAILED, EXIT_OK, emit, error, say, short, table


def _refused(exc: LookupError | ValueError) -> int:
    """What a person typed refused (a selector, a version, a digest...): exit 2, one line. The
    stored configuration failing its validation is not that: it goes on to ``main`` (exit 1)."""
    from tagpin.domain.config import ConfigError

    if isinstance(exc, ConfigError):
        raise exc
    return error(exc)


# A target's conditions that `status --exit-code` reports with exit 4.
UNHEALTHY = ("behind", "blocked", "failed", "gone")


def status(args: argparse.Namespace, _stack: Stack | None) -> int:
    from tagpin_cli import commands

    rows = commands.status()

    def render(data: list[dict[str, Any]]) -> None:
        tags = [r | {"digest": short(r["digest"])} for r in data]
        table("followed tags", tags, ["image", "version", "digest", "resolved", "changed", "error"])
        targets = [
            t | {"image": r["image"], "digest": short(t["digest"])} for r in data for t in r["targets"]
        ]
        table("targets", targets, ["target", "source", "condition", "digest", "updated", "detail"])

    emit(args, rows, render)
    unhealthy = any(t["condition"] in UNHEALTHY for r in rows for t in r["targets"])
    return EXIT_CHANGES if args.exit_code and unhealthy else EXIT_OK


def history(args: argparse.Namespace, _stack: Stack | None) -> int:
    from tagpin_cli import commands

    try:
        events = commands.history(args.selector, limit=args.limit)
    except LookupError as exc:
        return error(exc)
    emit(
        args,
        events,
        lambda d: table(
            "history",
            [e | {"digest": short(e["digest"])} for e in d],
            ["at", "target", "status", "digest", "trigger", "detail"],
        ),
    )
    return EXIT_OK


def plan(args: argparse.Namespace, _stack: Stack | None) -> int:
    from tagpin_cli import commands

    if args.json or not sys.stderr.isatty():
        rows = commands.plan()
    else:
        from rich.console import Console

        with Console(stderr=True).status("planning…") as spinner:
            rows = commands.plan(progress=lambda image: spinner.update(f"resolving {image}"))
    emit(args, rows, _print_plan)
    return EXIT_CHANGES if any(r["action"] == "roll" for r in rows) else EXIT_OK


def _print_plan(rows: list[dict[str, Any]]) -> None:
    table("plan (dry run: nothing changed)", rows, ["target", "version", "action", "current", "to", "detail"])
    rejected = {(r["image"], r.get("policy")): r["rejected"] for r in rows if r.get("rejected")}
    for (image, policy), reasons in rejected.items():
        say(f"{image} ({policy}): newer tags not chosen: {'; '.join(reasons)}")


def resolve(args: argparse.Namespace, _stack: Stack | None) -> int:
    from tagpin_cli import commands

    try:
        result = commands.resolve(args.image, args.policy)
    except ValueError as exc:
        return _refused(exc)
    emit(
        args,
        result,
        lambda d: table("resolve", [{"field": k, "value": v} for k, v in d.items()], ["field", "value"]),
    )
    return EXIT_OK


def downgrade(args: argparse.Namespace, _stack: Stack | None) -> int:
    from tagpin_cli import commands

    try:
        result = commands.downgrade(args.channel, args.version)
    except (LookupError, ValueError) as exc:
        return _refused(exc)
    emit(
        args,
        result,
        lambda d: say(
            f"{d['channel']}: head moved down to {d['version']} ({d['digest']}); held back: "
            f"{', '.join(d['held_back']) or 'nothing'} (tagpin clear releases one)"
        ),
    )
    return EXIT_OK


def _decide(args: argparse.Namespace, approve: bool) -> int:
    from tagpin_cli import commands

    try:
        result = commands.decide(args.selector, approve, args.digest)
    except (LookupError, ValueError) as exc:
        return _refused(exc)
    emit(args, result, lambda d: say(f"{d['image']}: {d['decision']} ({d['detail']})"))
    return EXIT_OK if result["decision"] in ("approved", "rejected") else EXIT_FAILED


def approve(args: argparse.Namespace, _stack: Stack | None) -> int:
    return _decide(args, True)


def reject(args: argparse.Namespace, _stack: Stack | None) -> int:
    return _decide(args, False)


def hold(args: argparse.Namespace, _stack: Stack | None) -> int:
    from tagpin_cli import commands

    try:
        result = commands.hold(args.target, args.until)
    except (LookupError, ValueError) as exc:
        return _refused(exc)
    emit(
        args,
        result,
        lambda d: say(
            f"{d['target']}: "
            + ("held" if d["held"] else "was held already")
            + (f" until {d['until']}" if d["held"] and d["until"] else "")
        ),
    )
    return EXIT_OK


def release(args: argparse.Namespace, _stack: Stack | None) -> int:
    from tagpin_cli import commands

    try:
        result = commands.release(args.target)
    except LookupError as exc:
        return error(exc)
    emit(
        args,
        result,
        lambda d: say(f"{d['target']}: {_released(d)}"),
    )
    return EXIT_OK if result["released"] else EXIT_FAILED


def _released(result: dict[str, Any]) -> str:
    if not result["released"]:
        return "was not held"
    if result["healing"] is None:
        return "released (nothing to apply: the tag has no digest yet, or its digest is blocked)"
    return f"released; the digest of {result['healing']} is applied again"


def clear(args: argparse.Namespace, _stack: Stack | None) -> int:
    from tagpin_cli import commands

    try:
        result = commands.clear(args.channel, args.version)
    except (LookupError, ValueError) as exc:
        return _refused(exc)
    emit(
        args,
        result,
        lambda d: say(f"{d['version']}: " + ("cleared" if d["cleared"] else "was not marked bad")),
    )
    return EXIT_OK if result["cleared"] else EXIT_FAILED


def config(args: argparse.Namespace, _stack: Stack | None) -> int:
    from tagpin.domain.config import ConfigError

    from tagpin_cli import commands

    try:
        result = (
            commands.config_validate(args.file)
            if args.action == "validate"
            else commands.config_push(args.file)
        )
    except (ConfigError, OSError) as exc:
        return error(exc)
    emit(args, result, lambda d: say(", ".join(f"{k}: {v}" for k, v in d.items())))
    return EXIT_OK


def redrive(args: argparse.Namespace, stack: Stack | None) -> int:
    from tagpin_cli import commands

    assert stack is not None  # a command that needs the stack
    result = commands.redrive(stack.dead_letter_queue_url, stack.queue_url, limit=args.limit)
    emit(args, result, _print_redrive)
    return EXIT_OK


def _print_redrive(result: dict[str, Any]) -> None:
    say(f"moved {result['moved']} message(s) from the dead-letter queue back to the queue")
    failed = result["failed_invocations"]
    if failed:
        say(f"removed {len(failed)} record(s) of failed runs (the next run repeats the work):")
        for record in failed:
            say(f"  {record['at']}  {record['function']}  {record['error']}")


def doctor(args: argparse.Namespace, stack: Stack | None) -> int:
    """The stack is looked up here (not by main): a missing stack is a report too."""
    from tagpin_cli import doctor as checks
    from tagpin_cli.environment import answers, chosen, stopped

    try:
        found = chosen(args)
        if found.local and not answers(found):
            raise stopped(found)
    except StackNotFound as exc:
        report = checks.not_found(str(exc), local=bool(args.local or args.endpoints))
    else:
        found.apply()
        report = checks.run(found)
    emit(args, report.as_json(), lambda _: checks.render(report, output.console()))
    return report.exit_code(strict=args.strict)


def demo(args: argparse.Namespace, _stack: Stack | None) -> int:
    """The demo's narrative on stdout; with --json on stderr, and on stdout one JSON document: the
    results of every step (``tagpin_local.demo``) and its figures (``summary``)."""
    import contextlib
    import json

    from tagpin_local import demo as scenario

    if not args.json:
        return scenario.main([])
    with contextlib.redirect_stdout(sys.stderr):
        document = scenario.document(scenario.run())
    print(json.dumps(document, indent=2))
    return EXIT_OK
