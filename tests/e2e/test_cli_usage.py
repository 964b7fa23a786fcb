"""The CLI as a person first meets it, no stack needed: `tagpin --help` and each command's help, what
argparse refuses (exit 2, the usage on stderr, nothing on stdout), and no local stack (exit 3)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tagpin_cli.parser import build_parser, normalise

from tests.support.cli import one_line_error, tagpin

pytestmark = pytest.mark.e2e


def test_missing_local_stack_is_exit_3(tmp_path):
    ran = tagpin("--local", str(tmp_path / "none.json"), "status")
    assert ran.code == 3 and ran.out == "" and one_line_error(ran.err) and "tagpin local" in ran.err


def test_help_and_bad_usage():
    """`tagpin --help` lists every command; each command's --help answers; what argparse refuses
    is exit 2 with the usage on stderr and nothing on stdout."""
    listed = tagpin("--help")
    assert (listed.code, listed.err) == (0, "")
    commands = [
        *("status", "history", "plan", "resolve", "downgrade", "approve", "reject", "hold", "release"),
        *("clear", "config", "redrive", "doctor", "local", "demo"),
    ]
    for command in commands:
        assert f"    {command} " in listed.out, command
    with ThreadPoolExecutor(4) as pool:
        helps = list(pool.map(lambda c: tagpin(c, "--help"), commands))
    for command, ran in zip(commands, helps, strict=True):
        assert (ran.code, ran.err) == (0, "") and ran.out.startswith(f"usage: tagpin {command}"), str(ran)
    assert "TARGET" in helps[commands.index("hold")].out and "--until" in helps[commands.index("hold")].out
    wrong: list[tuple[list[str], str]] = [
        ([], "the following arguments are required: COMMAND"),
        (["nosuch"], "invalid choice: 'nosuch'"),
        (["hold"], "the following arguments are required: TARGET"),
        (["release"], "the following arguments are required: TARGET"),
        (["approve"], "the following arguments are required: IMAGE|TARGET"),
        (["downgrade", "only-a-channel"], "the following arguments are required: version"),
        (["config", "check", "x.yaml"], "invalid choice: 'check'"),
        (["status", "--bogus"], "unrecognized arguments: --bogus"),
        (["history", "--limit", "many"], "invalid int value: 'many'"),
        (["local", "pull"], "invalid choice: 'pull'"),
    ]
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda w: tagpin(*w[0]), wrong))
    for (argv, message), ran in zip(wrong, runs, strict=True):
        assert ran.code == 2 and ran.out == "" and message in ran.err, (argv, str(ran))
        assert ran.err.startswith("usage: tagpin") and "Traceback" not in ran.err


def test_the_global_options_parse_the_same_wherever_they_are():
    """--local, --endpoints and --json before or after the command, and the old `--local FILE`
    (test_cli runs the main forms as processes against a stack)."""
    endpoints, image = "/somewhere/endpoints.json", "registry.example/team/web:stable"
    forms = {
        ("status", None): [
            ["--local", "status", "--json"],
            ["--json", "status", "--local"],
            ["--local", endpoints, "--json", "status"],
            [f"--local={endpoints}", "status", "--json"],
            ["--endpoints", endpoints, "--json", "status"],
            ["status", "--local", "--endpoints", endpoints, "--json"],
        ],
        ("history", image): [
            ["--json", "history", "--local", image],
            ["history", image, "--json", "--local"],
        ],
    }
    for (command, selector), argvs in forms.items():
        for argv in argvs:
            parsed = build_parser().parse_args(normalise(argv))
            assert parsed.json and (parsed.local or parsed.endpoints) and parsed.command == command, argv
            assert (
                parsed.endpoints in (None, Path(endpoints)) and getattr(parsed, "selector", None) == selector
            )
