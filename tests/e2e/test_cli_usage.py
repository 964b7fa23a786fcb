"""The CLI as a person first meets it, no stack needed: `tagpin --help` and each command's help, what
argparse refuses (exit 2, the usage on stderr, nothing on stdout), and no local stack (exit 3)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tagpin_cli import environment
from tagpin_cli.parser import build_parser, command_names, normalise

from tests.support.cli import document, one_line_error, tagpin

pytestmark = pytest.mark.e2e


def test_missing_local_stack_is_exit_3(tmp_path: Path) -> None:
    ran = tagpin("--local", str(tmp_path / "none.json"), "status")
    assert ran.code == 3 and ran.out == "" and one_line_error(ran.err) and "tagpin local" in ran.err


def test_help_and_bad_usage() -> None:
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
        (["downgrade", "only-a-channel"], "the following arguments are required: VERSION"),
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


def test_the_global_options_parse_the_same_wherever_they_are() -> None:
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
            parser = build_parser()
            parsed = parser.parse_args(normalise(argv, command_names(parser)))
            assert parsed.json and (parsed.local or parsed.endpoints) and parsed.command == command, argv
            assert (
                parsed.endpoints in (None, Path(endpoints)) and getattr(parsed, "selector", None) == selector
            )


def test_every_command_follows_the_local_option() -> None:
    """``--local`` then any command is that command on the local stack, never ``--local FILE``
    with the command's name read as the file (approve and reject were: exit 2, invalid choice)."""
    image = "registry.example/team/web:stable"
    names = command_names(build_parser())
    assert {"status", "approve", "reject", "hold"} <= names
    for name in sorted(names):
        out = normalise(["--local", name, image], names)
        assert out[:2] == ["--local", name], (name, out)


def test_approve_after_the_local_option_asks_the_local_stack(tmp_path: Path) -> None:
    """The README's global options before the command: `tagpin --local approve IMAGE` with no
    local stack running is exit 3 (no local stack), as `tagpin --local hold` is."""
    env = {"HOME": str(tmp_path)}  # no endpoints file of a local stack there, nor in the directory
    for command in ("approve", "reject", "hold"):
        ran = tagpin("--local", command, "registry.example/team/web:stable", env=env, cwd=tmp_path)
        assert ran.code == 3 and "invalid choice" not in ran.err, (command, ran.code, ran.err)


# -- what a person types wrong, and the names help gives ---------------------------------------------
ROOT = Path(__file__).resolve().parents[2]


def _closed_stack(path: Path) -> Path:
    """An endpoints file whose AWS endpoint is a closed port: a command that asks the stack anything
    fails with a connection error (exit 1); one refused for what was typed never gets that far."""
    closed = "http://127.0.0.1:9"
    environment.write_local(
        {
            "state_table": "tagpin-state",
            "queue_url": f"{closed}/000000000000/changes.fifo",
            "dead_letter_queue_url": f"{closed}/000000000000/dead-letters.fifo",
            "config_parameter": "/tagpin/config",
            "aws_endpoint": closed,
        },
        path,
    )
    return path


def test_what_is_typed_wrong_is_exit_2_before_the_stack_is_asked(tmp_path: Path) -> None:
    """A limit that is not a positive number, a version policy that does not parse, a tag given with
    --policy, a configuration file that is not UTF-8 text, an approval's --digest that is not a
    digest: exit 2 for what was typed, whatever state the stack is in (here: it does not answer)."""
    endpoints = str(_closed_stack(tmp_path / "endpoints.json"))
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("clusters: {}\nimages: []\n# caf\u00e9\n".encode("latin-1"))
    repository = "registry.example/team/web"
    usage: list[tuple[list[str], str]] = [
        (["history", "--limit", "0"], "--limit: 0 is not a positive number"),
        (["history", "--limit", "-3"], "--limit: -3 is not a positive number"),
        (["redrive", "--limit", "0"], "--limit: 0 is not a positive number"),
    ]
    typed: list[tuple[list[str], str]] = [
        (["resolve", repository, "--policy", "^^nonsense"], "^^nonsense"),
        (["resolve", f"{repository}:stable", "--policy", "^1"], "without a tag"),
        (["config", "validate", str(latin1)], f"{latin1}: not UTF-8 text"),
        (["approve", f"{repository}:stable", "--digest", "sha256:nope"], "'sha256:nope'"),
        (["reject", "c/ns/Deployment/web/web", "--digest", "latest"], "'latest'"),
    ]
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda w: tagpin("--endpoints", endpoints, *w[0]), [*usage, *typed]))
    for (argv, message), ran in zip(usage, runs[: len(usage)], strict=True):
        assert ran.code == 2 and ran.out == "" and message in ran.err, (argv, str(ran))
        assert ran.err.startswith("usage: tagpin") and "Traceback" not in ran.err
    for (argv, message), ran in zip(typed, runs[len(usage) :], strict=True):
        assert ran.code == 2 and ran.out == "" and one_line_error(ran.err), (argv, str(ran))
        assert message in ran.err and "127.0.0.1:9" not in ran.err, (argv, str(ran))


def _cli_forms() -> list[str]:
    """Each command's form in README.md's table of the CLI's commands (its first column)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The `tagpin` CLI", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ", 1)[0] for line in section.splitlines() if line.startswith("| `")]
    return [f.replace("\\|", "|") for row in rows for f in re.findall(r"`([^`]+)`", row)]


def test_help_names_what_the_readme_names() -> None:
    """One name per concept: each argument and option value README.md's table names (IMAGE|TARGET,
    CHANNEL VERSION, FILE, --limit N ...) is the name in that command's usage."""
    forms = [f for f in _cli_forms() if not f.endswith("...")]
    assert len(forms) >= 15, forms
    commands = sorted({f.split()[0] for f in forms})
    with ThreadPoolExecutor(4) as pool:
        helps = dict(zip(commands, pool.map(lambda c: tagpin(c, "--help"), commands), strict=True))
    for form in forms:
        command, *words = re.findall(r"\[[^\]]*\]|\S+", form)
        ran = helps[command]
        usage = " ".join(ran.out.split("\n\n", 1)[0].split())
        assert ran.code == 0 and usage.startswith(f"usage: tagpin {command}"), str(ran)
        missing = [word for word in words if word not in usage]
        assert missing == [], f"README.md's `{form}`: {missing} not in {usage!r}"


def test_a_local_stack_that_stopped_is_exit_3(tmp_path: Path) -> None:
    """`tagpin local` killed leaves its endpoints file behind: each command that needs the stack, and
    the doctor, say that no local stack answers there and how to start one (exit 3, as a missing
    file is), not a connection error of whichever AWS call came first (exit 1)."""
    endpoints = str(_closed_stack(tmp_path / "endpoints.json"))
    commands = [
        ["status"],
        ["history"],
        ["plan"],
        ["resolve", "registry.example/team/web:stable"],
        ["hold", "c/ns/Deployment/web/web"],
        ["redrive"],
        ["config", "push", str(tmp_path / "tagpin.yaml")],
    ]
    (tmp_path / "tagpin.yaml").write_text("clusters: {}\nimages: []\n")
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda argv: tagpin("--endpoints", endpoints, *argv), commands))
        doctor, as_json = pool.map(  # a wide terminal: the doctor's detail on one line
            lambda j: tagpin("--endpoints", endpoints, *j, "doctor", env={"COLUMNS": "250"}), ([], ["--json"])
        )
    for argv, ran in zip(commands, runs, strict=True):
        assert ran.code == 3 and ran.out == "" and one_line_error(ran.err), (argv, str(ran))
        assert "no local stack answers at http://127.0.0.1:9" in ran.err, str(ran)
        assert "start one with `tagpin local`" in ran.err, str(ran)
    assert (
        doctor.code == 3 and "no local stack answers" in doctor.out and "start it: tagpin local" in doctor.out
    )
    report = document(as_json, 3)
    assert report["ok"] is False and report["checks"][0]["status"] == "fail", report


def test_a_bad_interval_is_refused_before_the_local_stack_starts(tmp_path: Path) -> None:
    """`tagpin local`'s intervals are seconds, 0 (off) to a day: `nan` would run the poller back to
    back, `inf` or 1e300 would end its schedule with an OverflowError, a negative number means
    nothing; each is exit 2 with the usage, and no stack starts (no endpoints file is written)."""
    endpoints = tmp_path / "endpoints.json"
    wrong = [
        ("--poll-interval", "nan"),
        ("--poll-interval", "inf"),
        ("--poll-interval", "1e300"),
        ("--poll-interval", "-5"),
        ("--reconcile-interval", "nan"),
        ("--reconcile-interval", "soon"),
    ]
    with ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda w: tagpin("local", *w, "--endpoints", str(endpoints), timeout=60), wrong))
    for (option, value), ran in zip(wrong, runs, strict=True):
        assert ran.code == 2 and ran.out == "" and ran.err.startswith("usage: tagpin local"), str(ran)
        assert f"argument {option}: {value!r} is not a number of seconds from 0 to 86400" in ran.err, str(ran)
    assert not endpoints.exists()
