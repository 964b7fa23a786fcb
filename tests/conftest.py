"""Shared test helpers: real components must be present under CI=true (fail, never skip)."""

from __future__ import annotations

import os
import shutil

import pytest


def require_binary(name: str, path: str | None = None) -> str:
    found = path if path and os.path.exists(path) else shutil.which(name)
    if found:
        return found
    message = f"{name} is not installed (make tools installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session", autouse=True)
def _close_cached_clients():
    """Close the composition root's cached clients (the registry client's event loop and
    connections) when the session ends, as a Lambda container's shutdown would."""
    yield
    from tagpin import wiring

    wiring.reset()
