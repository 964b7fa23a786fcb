"""The CLI as a person runs it: ``tagpin`` (the installed entry point) in a process of its own, its
exit code, stdout and stderr; and the secrets a local stack holds, which no output may contain."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from tagpin_cli import environment
from tagpin_local.stack import LocalStack

TAGPIN = str(Path(sys.executable).with_name("tagpin"))


@dataclass(frozen=True)
class Ran:
    argv: tuple[str, ...]
    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout as one JSON document (nothing else on it)."""
        return json.loads(self.out)

    def __str__(self) -> str:  # what an assertion shows
        command = " ".join(self.argv)
        return f"tagpin {command} -> {self.code}\nstdout: {self.out[-2000:]}\nstderr: {self.err[-2000:]}"


def one_line_error(err: str) -> bool:
    """stderr is one error line, no traceback."""
    return err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def tagpin(
    *argv: str,
    cwd: Path | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> Ran:
    """Run ``tagpin ARGV`` to its end (stdin: a pipe of ``stdin``, else closed: nothing waits for
    input), ``env`` added to the environment."""
    done = subprocess.run(
        [TAGPIN, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        env=os.environ | (env or {}),
    )
    return Ran(tuple(argv), done.returncode, done.stdout, done.stderr)


def _leaves(value: Any) -> list[str]:
    """Every string inside a parsed JSON or YAML document."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v)]
    return [value] if isinstance(value, str) else []


def stack_secrets(st: LocalStack, extra: tuple[str, ...] = ()) -> set[str]:
    """What the stack holds that nobody may see printed: the console's token and session key, the
    webhook token, every cluster's bearer token, and every value in its secret store (whole, and
    each string inside a JSON or YAML one: a password, a token, a webhook URL)."""
    found = {st.console_token, st._console_key, st.webhook_token, *extra}
    found |= {kube.token for kube in st.kubes.values() if kube.token}
    if st.secrets_in_ssm:
        pages = st.client("ssm").get_paginator("get_parameters_by_path")
        for page in pages.paginate(Path="/tagpin/", Recursive=True, WithDecryption=True):
            found |= {p["Value"] for p in page["Parameters"] if p["Type"] == "SecureString"}
    else:
        manager = st.client("secretsmanager")
        for page in manager.get_paginator("list_secrets").paginate():
            found |= {st.secret_value(s["Name"]) for s in page["SecretList"]}
    for text in list(found):
        with contextlib.suppress(yaml.YAMLError):
            found |= set(_leaves(yaml.safe_load(text)))  # JSON is YAML
    # short words (a context name, "local") are not secrets, nor a server's bare URL (a kubeconfig's
    # API server, printed as an endpoint); tokens, passwords, keys and webhook URLs are long
    return {s for s in found if len(s) >= 12 and not re.fullmatch(r"https?://127\.0\.0\.1:\d+/?", s)}


def endpoints_file(st: LocalStack, path: Path, **overrides: str) -> Path:
    """An endpoints file of the stack, as `tagpin local` writes it (with ``overrides``)."""
    environment.write_local(
        st.endpoints() | {"kubeconfig": json.dumps(st.kube.kubeconfig("local"))} | overrides, path
    )
    return path


@dataclass
class Cli:
    """``tagpin --endpoints FILE ...`` against one stack; every run is kept, and each output is
    checked for the stack's secrets as it comes."""

    st: LocalStack
    endpoints: Path
    extra: set[str] = field(default_factory=set)  # secrets the stack does not hold (a signing key)
    runs: list[Ran] = field(default_factory=list)

    def __call__(
        self, *argv: str, endpoints: Path | None = None, columns: int = 250, stdin: str | None = None
    ) -> Ran:
        # a wide terminal's tables: a target id or an image on one line
        where = str(endpoints or self.endpoints)
        ran = tagpin("--endpoints", where, *argv, env={"COLUMNS": str(columns)}, stdin=stdin)
        self.runs.append(ran)
        assert_no_secret(ran, stack_secrets(self.st, tuple(self.extra)))
        return ran

    def many(self, *argvs: Sequence[str], endpoints: Path | None = None, columns: int = 250) -> list[Ran]:
        """Runs that change nothing, side by side (each process mostly waits for its imports)."""
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(lambda argv: self(*argv, endpoints=endpoints, columns=columns), argvs))

    def json(self, *argv: str, code: int = 0, endpoints: Path | None = None) -> Any:
        """``--json`` output of a run that exits ``code`` with nothing on stderr."""
        return document(self("--json", *argv, endpoints=endpoints), code)

    def fails(self, *argv: str, code: int, endpoints: Path | None = None) -> str:
        """A run that fails with ``code``: nothing on stdout, one error line on stderr (returned)."""
        return failure(self(*argv, endpoints=endpoints), code)


def document(ran: Ran, code: int = 0) -> Any:
    """The one JSON document on stdout of a run that exited ``code`` with nothing on stderr."""
    assert (ran.code, ran.err) == (code, ""), str(ran)
    return ran.json()


def failure(ran: Ran, code: int) -> str:
    """The one error line of a run that failed with ``code`` and printed nothing on stdout."""
    assert ran.code == code and ran.out == "" and one_line_error(ran.err), str(ran)
    return ran.err


def printed(ran: Ran, code: int = 0) -> str:
    """stdout of a run that exited ``code`` with nothing on stderr."""
    assert (ran.code, ran.err) == (code, ""), str(ran)
    return ran.out


def assert_no_secret(ran: Ran, secrets: set[str]) -> None:
    leaked = [s[:4] + "…" for s in secrets if s in ran.out or s in ran.err]
    assert not leaked, f"tagpin {' '.join(ran.argv)} printed a secret ({', '.join(leaked)})"
