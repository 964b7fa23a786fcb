"""tagpin: keep Kubernetes workloads on floating tags pinned to the digest the tag points to now.

Global options (--stack, --local, --endpoints, --region, --json, -v) go before or after the command:
`tagpin --local status` and `tagpin status --local` are the same.

Output: the result on stdout (a table, or with --json one JSON document); an error is one line on
stderr. Exit codes: 0 success; 1 an operation failed (`doctor`: a check failed); 2 bad usage or an
invalid configuration file; 3 tagpin's resources or AWS credentials cannot be found; 4 `plan`:
something would roll, `status --exit-code`: a target is behind, blocked, failed or gone.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tagpin_cli import environment
from tagpin_cli.output import EXIT_ENVIRONMENT, EXIT_FAILED, error
from tagpin_cli.parser import build_parser, command_names, normalise


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
    parser = build_parser(__doc__ or "")
    words = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(normalise(words, command_names(parser)))
    if args.stack is not None and (args.local or args.endpoints is not None):
        parser.error("give one of --stack and --local")
    _logging(args.verbose)
    needs_stack = args.needs_stack and not (args.command == "config" and args.action == "validate")
    stack: environment.Stack | None = None
    try:
        with _closing():
            if needs_stack:
                stack = environment.chosen(args)
                stack.apply()
            result: int = args.func(args, stack)
    except environment.StackNotFound as exc:
        return error(exc, EXIT_ENVIRONMENT)
    except KeyboardInterrupt:
        return EXIT_FAILED
    except Exception as exc:
        if stack is not None and stack.local and not environment.answers(stack):
            return error(environment.stopped(stack), EXIT_ENVIRONMENT)  # not the first call's error
        return error(f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    return result


if __name__ == "__main__":
    sys.exit(main())
