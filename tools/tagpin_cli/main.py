"""tagpin: keep Kubernetes workloads on floating tags pinned to the digest the tag points to now.

Exit codes: 0 success; 1 an operation failed; 2 bad usage or an invalid configuration file;
3 tagpin's resources or AWS credentials cannot be found; 4 ``plan``: something would roll,
``status --exit-code``: a target is behind, failed or gone.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from tagpin_cli import environment

EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_CHANGES = 1, 2, 3, 4


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=False, highlight=False)


def _table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*["" if row.get(c) is None else str(row.get(c)) for c in columns])
    _console().print(table)


def _short(digest: str | None) -> str | None:
    return digest[:19] + "…" if digest and len(digest) > 20 else digest


def _emit(args: argparse.Namespace, data: Any, render: Any) -> None:
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        render(data)


# -- commands ----------------------------------------------------------------------------------
def _status(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    rows = commands.status()

    def render(data: list[dict[str, Any]]) -> None:
        tags = [r | {"digest": _short(r["digest"])} for r in data]
        _table("followed tags", tags, ["image", "digest", "resolved", "changed", "error"])
        targets = [
            t | {"image": r["image"], "digest": _short(t["digest"])} for r in data for t in r["targets"]
        ]
        _table("targets", targets, ["target", "condition", "digest", "updated", "detail"])

    _emit(args, rows, render)
    unhealthy = any(t["condition"] in ("behind", "failed", "gone") for r in rows for t in r["targets"])
    return EXIT_CHANGES if args.exit_code and unhealthy else 0


def _history(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    try:
        events = commands.history(args.selector, limit=args.limit)
    except LookupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _emit(
        args,
        events,
        lambda d: _table(
            "history",
            [e | {"digest": _short(e["digest"])} for e in d],
            ["at", "target", "status", "digest", "trigger", "detail"],
        ),
    )
    return 0


def _plan(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    console = _console()
    with console.status("planning…") as spinner:
        rows = commands.plan(progress=lambda image: spinner.update(f"resolving {image}"))
    _emit(
        args,
        rows,
        lambda d: _table(
            "plan (dry run: nothing changed)", d, ["target", "action", "current", "to", "detail"]
        ),
    )
    return EXIT_CHANGES if any(r["action"] == "roll" for r in rows) else 0


def _resolve(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    result = commands.resolve(args.image)
    _emit(
        args,
        result,
        lambda d: _table("resolve", [{"field": k, "value": v} for k, v in d.items()], ["field", "value"]),
    )
    return 0


def _config(args: argparse.Namespace) -> int:
    from tagpin.domain.config import ConfigError

    from tagpin_cli import commands

    try:
        result = (
            commands.config_validate(args.file)
            if args.action == "validate"
            else commands.config_push(args.file)
        )
    except (ConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _emit(args, result, lambda d: print(", ".join(f"{k}: {v}" for k, v in d.items())))
    return 0


def _redrive(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    target: environment.Target = args.target
    result = commands.redrive(target.dead_letter_queue_url, target.queue_url, limit=args.limit)
    _emit(
        args,
        result,
        lambda d: print(f"moved {d['moved']} message(s) from the dead-letter queue back to the queue"),
    )
    return 0


def _local(args: argparse.Namespace) -> int:
    from tagpin_local.stack import LocalStack, StackOptions

    options = StackOptions(
        notifications=not args.no_notifications,
        poll_interval=None if args.poll_interval <= 0 else args.poll_interval,
        log_level=args.log_level,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with LocalStack(options) as stack:
        if not args.empty:
            from tagpin_local.kubesim import deployment

            assert stack.registry is not None
            stack.kube.create(
                deployment("web", "default", f"{stack.registry.host}/demo/web:stable", container="web")
            )
        endpoints = stack.endpoints()
        endpoints["kubeconfig"] = json.dumps(stack.kube.kubeconfig("local"))
        environment.write_local(endpoints, args.endpoints_file)
        print(json.dumps(endpoints), flush=True)
        stop.wait()
    args.endpoints_file.unlink(missing_ok=True)
    return 0


def _demo(_args: argparse.Namespace) -> int:
    from tagpin_local.demo import main

    return main([])


# -- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tagpin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--stack", default=None, help="deployed stack name (default: $TAGPIN_STACK or 'tagpin')"
    )
    where.add_argument(
        "--local",
        nargs="?",
        const=environment.LOCAL_FILE,
        type=Path,
        metavar="FILE",
        help=f"use the local stack started by `tagpin local` (default {environment.LOCAL_FILE})",
    )
    parser.add_argument("--region", default=None, help="AWS region of the stack")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Any, help_text: str, needs_stack: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(func=func, needs_stack=needs_stack)
        sub.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )
        return sub

    status = add(
        "status",
        _status,
        "followed tags, their digests and errors; each target current, behind, failed or gone",
    )
    status.add_argument(
        "--exit-code", action="store_true", help="exit 4 when a target is behind, failed or gone"
    )
    history = add(
        "history",
        _history,
        "the audit trail of an image (IMAGE), a target (cluster/ns/kind/name/container) or all",
    )
    history.add_argument("selector", nargs="?")
    history.add_argument("--limit", type=int, default=50)
    add("plan", _plan, "what would roll where right now (dry run; exit 4 when something would roll)")
    resolve = add("resolve", _resolve, "the digest behind a tag and how the registry answered")
    resolve.add_argument("image")
    config = add("config", _config, "validate a configuration file, or push it to the SSM parameter")
    config.add_argument("action", choices=["validate", "push"])
    config.add_argument("file", type=Path)
    redrive = add("redrive", _redrive, "move dead-lettered messages back to the changes queue")
    redrive.add_argument("--limit", type=int, default=None)
    local = add(
        "local", _local, "run the local stack until interrupted; prints its endpoints as one JSON line", False
    )
    local.add_argument(
        "--poll-interval", type=float, default=30.0, help="seconds between poller runs; 0 = off"
    )
    local.add_argument("--no-notifications", action="store_true", help="registry push notifications off")
    local.add_argument("--log-level", default="WARNING")
    local.add_argument("--empty", action="store_true", help="do not create the demo Deployment default/web")
    local.add_argument("--endpoints-file", type=Path, default=environment.LOCAL_FILE)
    add("demo", _demo, "run the demo scenario and exit", False)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    needs_stack = args.needs_stack and not (args.command == "config" and args.action == "validate")
    try:
        if needs_stack:
            import os

            args.target = (
                environment.local(args.local)
                if args.local
                else environment.stack(args.stack or os.environ.get("TAGPIN_STACK", "tagpin"), args.region)
            )
            args.target.apply()
        result: int = args.func(args)
    except environment.StackNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except KeyboardInterrupt:
        return EXIT_FAILED
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return result


if __name__ == "__main__":
    sys.exit(main())
