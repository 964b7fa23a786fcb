"""Shared test helpers: real components must be present under CI=true (fail, never skip)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from tagpin_local import moto_expressions, moto_partitions, moto_transactions
from tagpin_local.kube.manifests import deployment
from tagpin_local.stack import LocalStack, StackOptions

# Every AWS call a function makes in any test is checked against its role in template.yaml.
from tests.support import iamsession
from tests.support.iamsession import (  # noqa: F401 (pytest hooks and an autouse fixture)
    _iam_allows_every_call,
    pytest_configure,
    pytest_sessionfinish,
    pytest_unconfigure,
)

# moto's own TransactWriteItems deep-copies every table it names; another thread writing that table
# meanwhile (a consumer's STARTED item beside its claim, a reconciler's pool, a deployed handler's
# unserialized client) breaks the copy ("dictionary changed size during iteration"). The local
# stack and bench/reconcile.py run moto with this patch; so does every test of the process, in
# process, from collection on, whatever ran before it.
moto_transactions.install()
# The same for the stack's other two moto patches (one partition read per Query, each expression
# text parsed once): their answers equal moto's (tests/integration/test_moto_partitions.py and
# test_moto_expressions.py compare them, moto's own under ``as_is``), so this changes no answer,
# only that a test's moto no longer depends on whether a LocalStack ran before it in its process.
# moto's DynamoDB lock (``moto_process.serialize_dynamodb``) is not installed here: its test shows
# the failure it prevents by running without it (test_moto_serialized).
moto_partitions.install()
moto_expressions.install()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    iamsession.pytest_terminal_summary(terminalreporter)
    from tests.support.kube import SUMMARY

    for line in SUMMARY:
        terminalreporter.write_line(line)


def require_binary(name: str, path: str | None = None) -> str:
    found = path if path and os.path.exists(path) else shutil.which(name)
    if found:
        return found
    message = f"{name} is not installed (make tools installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session", autouse=True)
def _close_cached_clients() -> Iterator[None]:
    """Close the composition root's cached clients (the registry client's event loop and
    connections) when the session ends, as a Lambda container's shutdown would."""
    yield
    from tagpin import wiring

    wiring.reset()


@pytest.fixture(scope="session", autouse=True)
def _kube_pool() -> Iterator[None]:
    """Every local stack of the session borrows its clusters from one pool (started when first
    needed, reset between stacks: tagpin_local.kube.pool); its memory is printed at the end, and
    no process of it outlives the session."""
    from tests.support.kube import SessionPool, lend

    with lend(SessionPool()):
        yield


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """The local stack with notifications, polling and the SQS loop off: each test drives every
    step itself. A Deployment default/web runs <registry>/demo/web:stable."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with LocalStack(StackOptions(notifications=False, poll_interval=None, consume=False)) as st:
        assert st.registry is not None
        st.kube.create(deployment("web", "default", f"{st.registry.host}/demo/web:stable", container="web"))
        yield st
