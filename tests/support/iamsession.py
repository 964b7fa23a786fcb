"""The session-wide IAM check (tests/conftest.py imports these hooks): every AWS call any test makes
a function make is evaluated against that function's role in template.yaml, default parameters
(``tests.support.iam``). A call the role does not allow fails the test it was made in (at its
teardown), whatever the order tests run in; one made after the last test fails the session. The
calls of ``tests/integration/test_iam.py`` are its own (``Recorder.capture``): it evaluates them
with the parameters its scenarios set, and checks that every statement is used.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.support.iam import Call
from tests.support.iamrecord import Recorder
from tests.support.iamroles import denied, report

_problems: list[str] = []
_lock = threading.Lock()


def _check(call: Call) -> None:
    try:
        found = denied([call])
    except Exception as exc:  # the evaluator failed: as loud as a denial
        found = [f"{call.function}: {call.operation}: the IAM check failed: {type(exc).__name__}: {exc}"]
    if found:
        with _lock:
            _problems.extend(found)


RECORDER = Recorder(on_call=_check)


def _take() -> list[str]:
    with _lock:
        taken = list(dict.fromkeys(_problems))
        _problems.clear()
    return taken


def pytest_configure(config: pytest.Config) -> None:
    RECORDER.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    RECORDER.uninstall()


@pytest.fixture(autouse=True)
def _iam_allows_every_call() -> Iterator[None]:
    """Fails the test when a function made a call its role in template.yaml does not allow."""
    yield
    problems = _take()
    if problems:
        pytest.fail(
            "calls the functions' roles in template.yaml do not allow (tests/support/iam.py):\n  "
            + "\n  ".join(problems),
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    problems = _take()
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "IAM: calls made after the last test that the roles do not allow:\n  " + "\n  ".join(problems)
        if reporter is not None:
            reporter.write_line(text, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if RECORDER.calls and terminalreporter.config.getoption("verbose") > 0:
        terminalreporter.write_sep("-", "AWS calls by function (tests/support/iam.py)")
        terminalreporter.write_line(report(RECORDER.calls))
