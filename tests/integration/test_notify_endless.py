"""A notification webhook (the operator's Slack, Teams or HTTP URL) that answers the POST with an
endless body, on 127.0.0.1: the notification is sent and the answer's body is not read beyond a
bound (before, it was read whole into the consumer's memory: a URL that points at a large download
by mistake would have exhausted the function's memory mid-rollout)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from tagpin.adapters.notify import post_json

pytestmark = pytest.mark.integration

HUGE = 64 * 1024 * 1024


@dataclass
class Endless:
    sent: int = 0
    posted: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        endless = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                endless.posted.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Length", str(HUGE))
                self.end_headers()
                chunk = b" " * (1024 * 1024)
                try:
                    for _ in range(HUGE // len(chunk)):
                        self.wfile.write(chunk)
                        endless.sent += len(chunk)
                except OSError:  # the client stopped reading
                    pass

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture
def endless() -> Iterator[Endless]:
    server = Endless()
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_an_endless_answer_is_not_read_whole(endless: Endless) -> None:
    post_json(endless.url, {"text": "web rolled to sha256:abc"})
    assert endless.posted == [b'{"text": "web rolled to sha256:abc"}']
    assert endless.sent < HUGE // 2
