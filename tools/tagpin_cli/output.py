"""What the CLI prints and returns: the result on stdout (a table, or with --json one JSON document),
an error as one line on stderr, and the exit codes (documented in ``tagpin --help``).

Much of what is printed comes from outside: a registry's or a cluster's answer, a failed run's error
message, a person's name, as the functions stored them. A table or a line shows such text inert
(``inert``): a character a terminal would act on (the ESC of an escape sequence that clears the
screen or retitles the terminal, a bell, a carriage return, a newline that would forge a row, a
bidi override) is written as its escape, ``\\x1b`` or ``\\n``; any script's text is shown as it
is. JSON keeps the text exactly (escaped)."""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from collections.abc import Callable
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_CHANGES = 0, 1, 2, 3, 4


def console() -> Any:
    from rich.console import Console

    return Console(stderr=False, highlight=False)


def table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
    from rich.table import Table
    from rich.text import Text

    shown = Table(title=title, show_lines=False)
    for column in columns:
        shown.add_column(column, overflow="fold")  # image names and target ids in full, folded
    for row in rows:
        # Text, not markup: a registry's or a person's text is shown as it is
        shown.add_row(*[Text("" if row.get(c) is None else inert(row.get(c))) for c in columns])
    console().print(shown)


# What a terminal acts on rather than shows: control characters (ESC, BEL, CR, a newline that would
# forge a row; Unicode category Cc), the bidirectional controls (text that reads backwards), and the
# line and paragraph separators. Everything else any script writes (a ZWJ or ZWNJ in a name, a
# no-break space) is shown as it is.
_ACTS = frozenset("\u061c\u200e\u200f\u2028\u2029") | frozenset(
    map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
)


def inert(value: object) -> str:
    """``value`` as text a terminal shows as it is: each character it would act on as its escape
    (``\\x1b``, ``\\n``, ``\\u202e``); text of any script unchanged."""
    text = str(value)
    return "".join(repr(c)[1:-1] if c in _ACTS or unicodedata.category(c) == "Cc" else c for c in text)


def say(line: str) -> None:
    """One line on stdout, inert: what it quotes from outside cannot add a line or move the cursor."""
    print(inert(line))


def short(digest: str | None) -> str | None:
    return digest[:19] + "…" if digest and len(digest) > 20 else digest


def emit(args: argparse.Namespace, data: Any, render: Callable[[Any], None]) -> None:
    """One JSON document with --json, else ``render(data)``."""
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        render(data)


def one_line(exc: BaseException | str) -> str:
    """A message on one line (its whitespace, newlines included, collapsed), inert."""
    return inert(" ".join(str(exc).split()))


def error(message: BaseException | str, code: int = EXIT_USAGE) -> int:
    """An error: one line on stderr; returns ``code``."""
    print(f"error: {one_line(message)}", file=sys.stderr)
    return code
