"""A Git host's REST API (pull-request mode) that answers JSON nested past Python's parser depth,
on 127.0.0.1: its answer is an API answer with no JSON (``GitError`` naming the request), as any
unreadable answer is, never a ``RecursionError`` with a traceback that fails the write-back."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest
from tagpin.adapters.git.reviews import RestReviews
from tagpin.domain.config import GitHost, GitHostKind
from tagpin.ports.git import GitError

pytestmark = pytest.mark.integration

DEPTH = 100_000
DEEP = b"[" * DEPTH + b"]" * DEPTH


@pytest.fixture
def api() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(DEEP)))
            self.end_headers()
            self.wfile.write(DEEP)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("kind", [GitHostKind.GITHUB, GitHostKind.GITLAB])
def test_a_deeply_nested_answer_is_an_answer_with_no_json(api: str, kind: GitHostKind) -> None:
    hosts = {"git.example.com": GitHost(kind=kind, api_url=api)}
    reviews = RestReviews(lambda: hosts, lambda _host: ("tagpin", "t0ken-never-shown"), timeout=5)
    with pytest.raises(GitError, match="with no JSON") as caught:
        reviews.find("https://git.example.com/org/apps.git", "tagpin/web", "main")
    assert "t0ken-never-shown" not in str(caught.value)
