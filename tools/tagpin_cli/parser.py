"""The command line: every command, its arguments and the global options (before or after the
command), and the old ``--local FILE`` form kept working. Each command's handler takes the parsed
arguments and the stack it runs against (None for the commands that need none)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from tagpin_cli import environment, handlers
from tagpin_cli import local as local_stack

DOCTOR_HELP = """check a stack end to end, read-only: outputs, configuration, secrets, each registry (a HEAD
of one followed tag with its credentials), each cluster (reachable; the verbs each function needs,
by SelfSubjectAccessReview), the webhook URL (an unauthenticated POST must answer 401), the alarm
topic's subscriptions, dead letters. Prints each check with what to fix. Exit 0: every check
passed or warned; 1: a check failed (with --strict: or warned); 3: the stack cannot be found."""


def command_names(parser: argparse.ArgumentParser) -> frozenset[str]:
    """Every command ``parser`` (``build_parser``'s) defines (read from it, so a new command is one
    of them: the old ``--local FILE`` form must not read a command's name as its file)."""
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return frozenset(commands.choices)


_VALUED = ("--stack", "--region", "--endpoints")  # global options that take a value


def _global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """The options every command accepts, before or after the command's name. On the subcommands
    their default is SUPPRESS, so a value given before the command is not reset after it."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("where tagpin runs (before or after the command)")
    group.add_argument(
        "--stack",
        default=default(None),
        metavar="NAME",
        help=f"a deployed stack (default: $TAGPIN_STACK, else {environment.DEFAULT_STACK!r})",
    )
    group.add_argument(
        "--local",
        action="store_true",
        default=default(False),
        help=f"the local stack started by `tagpin local` (its endpoints file: {environment.LOCAL_FILE})",
    )
    group.add_argument(
        "--endpoints",
        type=Path,
        default=default(None),
        metavar="FILE",
        help="the local stack's endpoints file (implies --local)",
    )
    group.add_argument("--region", default=default(None), help="AWS region of the stack")
    group.add_argument(
        "--json", action="store_true", default=default(False), help="machine-readable output (one document)"
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default(0),
        help="the library's log on stderr (-v: info, -vv: debug)",
    )


def _positive(text: str) -> int:
    """A count a person types (``--limit N``): a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


MAX_INTERVAL = 86400.0  # seconds: a day


def _seconds(text: str) -> float:
    """An interval a person types: seconds, 0 (off) to a day. Not ``nan`` (a schedule that waits
    ``nan`` seconds runs back to back), nor ``inf`` (it ends the schedule with an OverflowError)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_INTERVAL:  # nan compares false
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 0 to {MAX_INTERVAL:.0f}")
    return value


def normalise(argv: list[str], commands: frozenset[str]) -> list[str]:
    """Keep the old ``--local FILE`` (and ``--local=FILE``) working: before the command, a word after
    ``--local`` that is not a command's name (one of ``commands``) is the endpoints file."""
    out: list[str] = []
    i = 0
    seen_command = False
    while i < len(argv):
        word = argv[i]
        if word == "--":
            out.extend(argv[i:])
            break
        if word.startswith("--local="):
            out.extend(["--local", "--endpoints", word.split("=", 1)[1]])
        elif (
            word == "--local"
            and not seen_command
            and i + 1 < len(argv)
            and not argv[i + 1].startswith("-")
            and argv[i + 1] not in commands
        ):
            out.extend(["--local", "--endpoints", argv[i + 1]])
            i += 1
        elif word in _VALUED and not seen_command and i + 1 < len(argv):
            out.extend(argv[i : i + 2])
            i += 1
        else:
            seen_command = seen_command or word in commands
            out.append(word)
        i += 1
    return out


def build_parser(description: str = "") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tagpin", description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _global_options(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, func: Any, help_text: str, needs_stack: bool = True, description: str | None = None
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=help_text,
            description=description or help_text,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.set_defaults(func=func, needs_stack=needs_stack)
        _global_options(sub, suppress=True)
        return sub

    status = add(
        "status",
        handlers.status,
        "followed tags (configured and labelled), their digests and errors; each target current, "
        "behind, blocked (why), held, failed or gone",
    )
    status.add_argument(
        "--exit-code", action="store_true", help="exit 4 when a target is behind, blocked, failed or gone"
    )
    history = add(
        "history",
        handlers.history,
        "the audit trail of an image (IMAGE), a target (cluster/ns/kind/name/container) or all",
    )
    history.add_argument("selector", nargs="?", metavar="IMAGE|TARGET")
    history.add_argument("--limit", type=_positive, default=50, metavar="N", help="at most N entries")
    add("plan", handlers.plan, "what would roll where right now (dry run; exit 4 when something would roll)")
    resolve = add(
        "resolve",
        handlers.resolve,
        "the digest behind a tag and how the registry answered; with --policy, a repository's "
        "candidate versions and the head the policy chooses",
    )
    resolve.add_argument("image", metavar="IMAGE", help="REPO:TAG, or with --policy the repository")
    resolve.add_argument(
        "--policy", default=None, metavar="P", help="a version policy, e.g. '~1.4' (docs/policies.md)"
    )
    downgrade = add(
        "downgrade",
        handlers.downgrade,
        "move a version channel's head down to VERSION (recorded; the newer versions are held back "
        "until `tagpin clear`)",
    )
    downgrade.add_argument(
        "channel", metavar="CHANNEL", help="the channel, e.g. registry.example.com/team/web@stable"
    )
    downgrade.add_argument("version", metavar="VERSION")
    for verb, approve in (("approve", True), ("reject", False)):
        decide = add(
            verb,
            handlers.approve if approve else handlers.reject,
            f"{verb} the wave of IMAGE (or of TARGET's image) waiting for a person "
            + (
                "(it starts, through every gate)"
                if approve
                else "(the promotion halts; the digest is marked bad)"
            ),
        )
        decide.add_argument("selector", metavar="IMAGE|TARGET")
        decide.add_argument(
            "--digest", default=None, metavar="D", help="only if this digest is the one waiting"
        )
    hold = add(
        "hold",
        handlers.hold,
        "hold a target where it is: not patched (every digest) until released, or until --until",
    )
    hold.add_argument("target", metavar="TARGET", help="cluster/namespace/kind/name/container")
    hold.add_argument(
        "--until", default=None, metavar="T", help="ISO 8601 time with a zone, e.g. 2026-12-01T09:00:00Z"
    )
    release = add(
        "release",
        handlers.release,
        "end a target's hold (tagpin hold, or a person's change the reconciler found) and apply its tag now",
    )
    release.add_argument("target", metavar="TARGET", help="cluster/namespace/kind/name/container")
    clear = add("clear", handlers.clear, "let a version channel choose VERSION again (a version marked bad)")
    clear.add_argument("channel", metavar="CHANNEL")
    clear.add_argument("version", metavar="VERSION")
    config = add("config", handlers.config, "validate a configuration file, or push it to the SSM parameter")
    config.add_argument("action", choices=["validate", "push"])
    config.add_argument("file", type=Path, metavar="FILE")
    redrive = add(
        "redrive",
        handlers.redrive,
        "move dead-lettered changes and verifications back to the changes queue; list and clear failed runs",
    )
    redrive.add_argument(
        "--limit", type=_positive, default=None, metavar="N", help="at most N messages (default: all)"
    )
    doctor = add(
        "doctor",
        handlers.doctor,
        "check the stack end to end, read-only, and say what to fix (exit 1 when a check fails)",
        False,
        DOCTOR_HELP,
    )
    doctor.add_argument("--strict", action="store_true", help="a warning fails too (exit 1)")
    local = add(
        "local",
        local_stack.run,
        "run the local stack until interrupted (prints its endpoints as one JSON line on stdout; "
        "the functions' logs go to stderr); `tagpin local push REPO:TAG` pushes a new small image "
        "to the running local stack's registry",
        False,
    )
    local.add_argument("action", nargs="?", choices=["push"], help="push: push an image and exit")
    local.add_argument("image", nargs="?", metavar="REPO:TAG", help="with push: e.g. demo/web:stable")
    local.add_argument(
        "--poll-interval",
        type=_seconds,
        default=30.0,
        metavar="S",
        help="seconds between poller runs; 0 = off",
    )
    local.add_argument(
        "--reconcile-interval",
        type=_seconds,
        default=local_stack.RECONCILE_INTERVAL,
        metavar="S",
        help="seconds between reconciler runs (labelled workloads are followed); 0 = off",
    )
    local.add_argument("--no-notifications", action="store_true", help="registry push notifications off")
    local.add_argument("--log-level", default="WARNING")
    local.add_argument(
        "--secret-store",
        choices=["ssm", "secretsmanager"],
        default="ssm",
        help="where the secrets live, as the template's SecretStore (default ssm: SecureString parameters)",
    )
    local.add_argument("--empty", action="store_true", help="do not create the demo Deployment default/web")
    local.add_argument("--endpoints-file", type=Path, default=None, help=argparse.SUPPRESS)
    add("demo", handlers.demo, "run the demo scenario and exit", False)
    return parser
