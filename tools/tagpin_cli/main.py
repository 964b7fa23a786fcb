"""tagpin: keep Kubernetes workloads on floating tags pinned to the digest the tag points to now.

Global options (--stack, --local, --endpoints, --region, --json, -v) go before or after the command:
`tagpin --local status` and `tagpin status --local` are the same.

Output: the result on stdout (a table, or with --json one JSON document); an error is one line on
stderr. Exit codes: 0 success; 1 an operation failed (`doctor`: a check failed); 2 bad usage or an
invalid configuration file; 3 tagpin's resources or AWS credentials cannot be found; 4 `plan`:
something would roll, `status --exit-code`: a target is behind, failed or gone.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tagpin_cli import environment

EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_CHANGES = 1, 2, 3, 4
LOCAL_RECONCILE_INTERVAL = 15.0  # `tagpin local`: seconds between reconciler runs
DOCTOR_HELP = """check a stack end to end, read-only: outputs, configuration, secrets, each registry (a HEAD
of one followed tag with its credentials), each cluster (reachable; the verbs each function needs,
by SelfSubjectAccessReview), the webhook URL (an unauthenticated POST must answer 401), the alarm
topic's subscriptions, dead letters. Prints each check with what to fix. Exit 0: every check
passed or warned; 1: a check failed (with --strict: or warned); 3: the stack cannot be found."""


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=False, highlight=False)


def _table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")  # image names and target ids in full, folded
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
        _table("followed tags", tags, ["image", "version", "digest", "resolved", "changed", "error"])
        targets = [
            t | {"image": r["image"], "digest": _short(t["digest"])} for r in data for t in r["targets"]
        ]
        _table("targets", targets, ["target", "source", "condition", "digest", "updated", "detail"])

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

    if args.json or not sys.stderr.isatty():
        rows = commands.plan()
    else:
        from rich.console import Console

        with Console(stderr=True).status("planning…") as spinner:
            rows = commands.plan(progress=lambda image: spinner.update(f"resolving {image}"))
    _emit(
        args,
        rows,
        _print_plan,
    )
    return EXIT_CHANGES if any(r["action"] == "roll" for r in rows) else 0


def _print_plan(rows: list[dict[str, Any]]) -> None:
    _table(
        "plan (dry run: nothing changed)", rows, ["target", "version", "action", "current", "to", "detail"]
    )
    rejected = {(r["image"], r.get("policy")): r["rejected"] for r in rows if r.get("rejected")}
    for (image, policy), reasons in rejected.items():
        print(f"{image} ({policy}): newer tags not chosen: {'; '.join(reasons)}")


def _resolve(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    try:
        result = commands.resolve(args.image, args.policy)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _emit(
        args,
        result,
        lambda d: _table("resolve", [{"field": k, "value": v} for k, v in d.items()], ["field", "value"]),
    )
    return 0


def _downgrade(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    try:
        result = commands.downgrade(args.channel, args.version)
    except (LookupError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _emit(
        args,
        result,
        lambda d: print(
            f"{d['channel']}: head moved down to {d['version']} ({d['digest']}); held back: "
            f"{', '.join(d['held_back']) or 'nothing'} (tagpin clear releases one)"
        ),
    )
    return 0


def _decide(args: argparse.Namespace, approve: bool) -> int:
    from tagpin_cli import commands

    try:
        result = commands.decide(args.selector, approve, args.digest)
    except LookupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _emit(args, result, lambda d: print(f"{d['image']}: {d['decision']} ({d['detail']})"))
    return 0 if result["decision"] in ("approved", "rejected") else EXIT_FAILED


def _approve(args: argparse.Namespace) -> int:
    return _decide(args, True)


def _reject(args: argparse.Namespace) -> int:
    return _decide(args, False)


def _hold(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    try:
        result = commands.hold(args.target, args.until)
    except (LookupError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _emit(args, result, lambda d: print(f"{d['target']}: " + ("held" if d["held"] else "was held already")))
    return 0


def _release(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    try:
        result = commands.release(args.target)
    except LookupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _emit(
        args,
        result,
        lambda d: print(
            f"{d['target']}: "
            + (f"released; {d['healing']} applied again" if d["released"] else "was not held")
        ),
    )
    return 0 if result["released"] else EXIT_FAILED


def _clear(args: argparse.Namespace) -> int:
    from tagpin_cli import commands

    try:
        result = commands.clear(args.channel, args.version)
    except (LookupError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _emit(
        args,
        result,
        lambda d: print(f"{d['version']}: " + ("cleared" if d["cleared"] else "was not marked bad")),
    )
    return 0 if result["cleared"] else EXIT_FAILED


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
    _emit(args, result, _print_redrive)
    return 0


def _print_redrive(result: dict[str, Any]) -> None:
    print(f"moved {result['moved']} message(s) from the dead-letter queue back to the queue")
    failed = result["failed_invocations"]
    if failed:
        print(f"removed {len(failed)} record(s) of failed runs (the next run repeats the work):")
        for record in failed:
            print(f"  {record['at']}  {record['function']}  {record['error']}")


def local_options(args: argparse.Namespace) -> Any:
    """The local stack `tagpin local` runs: the poller and the reconciler on a schedule (0 = off)."""
    from tagpin_local.stack import StackOptions

    return StackOptions(
        notifications=not args.no_notifications,
        poll_interval=None if args.poll_interval <= 0 else args.poll_interval,
        reconcile_interval=None if args.reconcile_interval <= 0 else args.reconcile_interval,
        log_level=args.log_level,
        secret_store=args.secret_store,
    )


def _local(args: argparse.Namespace) -> int:
    from tagpin_local.stack import LocalStack

    path: Path = args.endpoints or args.endpoints_file or environment.LOCAL_FILE
    if args.action == "push":
        return _local_push(args, path)
    if args.image is not None:
        print("error: REPO:TAG is for `tagpin local push`", file=sys.stderr)
        return EXIT_USAGE
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with LocalStack(local_options(args)) as stack:
        if not args.empty:
            from tagpin_local.kube.manifests import deployment

            assert stack.registry is not None
            stack.kube.create(
                deployment("web", "default", f"{stack.registry.host}/demo/web:stable", container="web")
            )
        endpoints = stack.endpoints()
        # a person's kubeconfig: the cluster's admin, straight to the API server (tagpin's own, bound
        # to docs/rbac.yaml and through the front, is in the cluster secret)
        endpoints["kubeconfig"] = json.dumps(stack.kube.kubeconfig("local", identity=stack.kube.admin))
        environment.write_local(endpoints, path)
        print(json.dumps(endpoints), flush=True)
        print(
            f"console: {endpoints['console_url']} (sign in with the token console_token above)",
            file=sys.stderr,
            flush=True,
        )
        # Wake up now and then: the kernel may deliver SIGTERM to any of the stack's threads, and
        # Python runs the handler only once the main thread runs again; a plain ``stop.wait()``
        # could then sleep forever.
        while not stop.wait(0.5):
            pass
    path.unlink(missing_ok=True)
    return 0


def _local_push(args: argparse.Namespace, path: Path) -> int:
    """A new small image (random layer) under REPO:TAG in the local stack's registry: the tag moves."""
    from tagpin_local.oci import push_image

    if not args.image or ":" not in args.image.rsplit("/", 1)[-1]:
        print("error: give the image as REPO:TAG, e.g. `tagpin local push demo/web:stable`", file=sys.stderr)
        return EXIT_USAGE
    registry_url = str(environment.read_local(path).get("registry_url") or "")
    host = registry_url.split("://", 1)[-1]
    name = args.image.removeprefix(host + "/")
    repository, tag = name.rsplit(":", 1)
    digest = push_image(registry_url, repository, tag)
    result = {"image": f"{host}/{repository}:{tag}", "digest": digest}
    _emit(args, result, lambda d: print(f"pushed {d['image']} -> {d['digest']}"))
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from tagpin_cli import doctor

    try:
        target = _target(args)
    except environment.StackNotFound as exc:
        report = doctor.not_found(str(exc), local=bool(args.local or args.endpoints))
    else:
        target.apply()
        report = doctor.run(target)
    _emit(args, report.as_json(), lambda _: doctor.render(report, _console()))
    return report.exit_code(strict=args.strict)


def _demo(_args: argparse.Namespace) -> int:
    from tagpin_local.demo import main

    return main([])


# -- parser ------------------------------------------------------------------------------------
COMMANDS = (
    "status",
    "history",
    "plan",
    "resolve",
    "downgrade",
    "clear",
    "hold",
    "release",
    "config",
    "redrive",
    "doctor",
    "local",
    "demo",
)
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


def normalise(argv: list[str]) -> list[str]:
    """Keep the old ``--local FILE`` (and ``--local=FILE``) working: before the command, a word after
    ``--local`` that is not a command's name is the endpoints file."""
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
            and argv[i + 1] not in COMMANDS
        ):
            out.extend(["--local", "--endpoints", argv[i + 1]])
            i += 1
        elif word in _VALUED and not seen_command and i + 1 < len(argv):
            out.extend(argv[i : i + 2])
            i += 1
        else:
            seen_command = seen_command or word in COMMANDS
            out.append(word)
        i += 1
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tagpin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
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
        _status,
        "followed tags (configured and labelled), their digests and errors; each target current, "
        "behind, failed or gone",
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
    resolve = add(
        "resolve",
        _resolve,
        "the digest behind a tag and how the registry answered; with --policy, a repository's "
        "candidate versions and the head the policy chooses",
    )
    resolve.add_argument("image", help="REPO:TAG, or with --policy the repository")
    resolve.add_argument("--policy", default=None, help="a version policy, e.g. '~1.4' (docs/policies.md)")
    downgrade = add(
        "downgrade",
        _downgrade,
        "move a version channel's head down to VERSION (recorded; the newer versions are held back "
        "until `tagpin clear`)",
    )
    downgrade.add_argument("channel", help="the channel, e.g. registry.example.com/team/web@stable")
    downgrade.add_argument("version")
    for verb, approve in (("approve", True), ("reject", False)):
        decide = add(
            verb,
            _approve if approve else _reject,
            f"{verb} the wave of IMAGE (or of TARGET's image) waiting for a person "
            + (
                "(it starts, through every gate)"
                if approve
                else "(the promotion halts; the digest is marked bad)"
            ),
        )
        decide.add_argument("selector", metavar="IMAGE|TARGET")
        decide.add_argument("--digest", default=None, help="only if this digest is the one waiting")
    hold = add(
        "hold",
        _hold,
        "hold a target where it is: not patched (every digest) until released, or until --until",
    )
    hold.add_argument("target", help="cluster/namespace/kind/name/container")
    hold.add_argument("--until", default=None, help="ISO 8601 time with a zone, e.g. 2026-12-01T09:00:00Z")
    release = add(
        "release",
        _release,
        "end a target's hold (tagpin hold, or a person's change the reconciler found) and apply its tag now",
    )
    release.add_argument("target")
    clear = add("clear", _clear, "let a version channel choose VERSION again (a version marked bad)")
    clear.add_argument("channel")
    clear.add_argument("version")
    config = add("config", _config, "validate a configuration file, or push it to the SSM parameter")
    config.add_argument("action", choices=["validate", "push"])
    config.add_argument("file", type=Path)
    redrive = add(
        "redrive",
        _redrive,
        "move dead-lettered changes and verifications back to the changes queue; list and clear failed runs",
    )
    redrive.add_argument("--limit", type=int, default=None)
    doctor = add(
        "doctor",
        _doctor,
        "check the stack end to end, read-only, and say what to fix (exit 1 when a check fails)",
        False,
        DOCTOR_HELP,
    )
    doctor.add_argument("--strict", action="store_true", help="a warning fails too (exit 1)")
    local = add(
        "local",
        _local,
        "run the local stack until interrupted (prints its endpoints as one JSON line on stdout; "
        "the functions' logs go to stderr); `tagpin local push REPO:TAG` pushes a new small image "
        "to the running local stack's registry",
        False,
    )
    local.add_argument("action", nargs="?", choices=["push"], help="push: push an image and exit")
    local.add_argument("image", nargs="?", metavar="REPO:TAG", help="with push: e.g. demo/web:stable")
    local.add_argument(
        "--poll-interval", type=float, default=30.0, help="seconds between poller runs; 0 = off"
    )
    local.add_argument(
        "--reconcile-interval",
        type=float,
        default=LOCAL_RECONCILE_INTERVAL,
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
    add("demo", _demo, "run the demo scenario and exit", False)
    return parser


def _target(args: argparse.Namespace) -> environment.Target:
    import os

    if args.local or args.endpoints is not None:
        return environment.local(args.endpoints or environment.LOCAL_FILE)
    return environment.stack(
        args.stack or os.environ.get("TAGPIN_STACK", environment.DEFAULT_STACK), args.region
    )


def _logging(verbose: int) -> None:
    """The library logs through the standard library; the CLI prints its own results and errors. The
    library's log shows on stderr with -v only (without a handler of its own, Python would print its
    warnings to stderr by itself); other libraries' warnings still show."""
    import logging

    tagpin_logger = logging.getLogger("tagpin")
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)
        tagpin_logger.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    elif not tagpin_logger.handlers:
        tagpin_logger.addHandler(logging.NullHandler())


@contextmanager
def _closing() -> Iterator[None]:
    """The library's cached clients live as long as one command: the registry client's session and
    event loop are closed when it ends (a Lambda container keeps them warm instead)."""
    try:
        yield
    finally:
        if "tagpin.wiring" in sys.modules:
            from tagpin import wiring

            wiring.reset()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(normalise(sys.argv[1:] if argv is None else list(argv)))
    if args.stack is not None and (args.local or args.endpoints is not None):
        parser.error("give one of --stack and --local")
    _logging(args.verbose)
    needs_stack = args.needs_stack and not (args.command == "config" and args.action == "validate")
    try:
        with _closing():
            if needs_stack:
                args.target = _target(args)
                args.target.apply()
            result: int = args.func(args)
    except environment.StackNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except KeyboardInterrupt:
        return EXIT_FAILED
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    return result


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":
    sys.exit(main())
