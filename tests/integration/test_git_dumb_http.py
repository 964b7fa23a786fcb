"""A server that answers Git's refs discovery without the smart protocol's content type (a bare
repository served as static files: Git's "dumb" HTTP) made dulwich fetch every object itself and
inflate it before any pack reached tagpin's walker: the budget of what a fetch inflates to did not
hold there (a blob of one repeated byte, 64 MiB inflated from about 64 KB, was held whole twice
before the walker stopped the fetch). Such a server is refused, that repository's error, and
nothing of it is inflated."""

from __future__ import annotations

import functools
import subprocess
import threading
import tracemalloc
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tagpin.adapters.git.repositories import DulwichRepositories
from tagpin.ports.git import Branch, GitError, GitTooLarge
from tagpin_local.gitserver import GitServer

from tests.support.git import git_http_server

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
BUDGET, INFLATED = 4 * MiB, MiB
BOMB = "a" * 64 * MiB  # about 64 KB in the repository


class _Files(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the tests' output stays quiet
        pass


@pytest.fixture
def server() -> Iterator[GitServer]:
    yield from git_http_server()


@pytest.fixture
def static(server: GitServer) -> Iterator[str]:
    """The Git server's repositories served as plain files (dumb HTTP): its base URL."""
    files = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Files, directory=str(server.root)))
    threading.Thread(target=files.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{files.server_address[1]}"
    finally:
        files.shutdown()
        files.server_close()


def test_a_dumb_http_server_is_refused_before_anything_is_inflated(server: GitServer, static: str) -> None:
    server.create("org/bomb", {"kustomization.yaml": "images: []\n", "bomb.txt": BOMB})
    subprocess.run(["git", "update-server-info"], cwd=server.path("org/bomb"), check=True)
    url = f"{static}/org/bomb.git"
    repos = DulwichRepositories(lambda _h: None, timeout=5, fetch_budget=BUDGET, inflated_budget=INFLATED)
    tracemalloc.start()
    try:
        with pytest.raises(GitError) as caught:
            repos.read(Branch(url, "main"), ["kustomization.yaml"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not isinstance(caught.value, GitTooLarge), caught.value
    assert str(caught.value) == (
        f"{url}: fetch failed: the server does not speak Git's smart HTTP protocol (not supported)"
    )
    assert peak < 8 * MiB, peak / MiB
    assert repos.kept() == {}
