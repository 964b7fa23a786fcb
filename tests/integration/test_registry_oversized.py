"""A registry (or its token endpoint) that answers with an endless body, through the production
transport (aiohttp) on 127.0.0.1: the resolution is refused with an error that says the bound, not
read whole into the poller's memory (and then hashed, or parsed, as if it were an answer)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.resilience import RetryPolicy
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import RegistryAccess, RegistryError

pytestmark = pytest.mark.integration

HUGE = 64 * 1024 * 1024  # what the server claims and would stream: far past any manifest or token


@dataclass
class Flood:
    """A registry on 127.0.0.1 whose HEAD of a manifest gives no Docker-Content-Digest (so the
    client falls back to a GET) and whose GET of a manifest, or of the token endpoint (``/token``,
    when ``bearer``), streams ``HUGE`` bytes; ``sent`` counts the bytes it managed to write."""

    bearer: bool = False
    sent: int = 0
    paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        flood = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_HEAD(self) -> None:
                flood.paths.append(f"HEAD {self.path}")
                if self._challenged():
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.oci.image.index.v1+json")
                self.send_header("Content-Length", "2")
                self.end_headers()

            def do_GET(self) -> None:
                flood.paths.append(f"GET {self.path}")
                if not self.path.startswith("/token") and self._challenged():
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(HUGE))
                self.end_headers()
                chunk = b" " * (1024 * 1024)
                try:
                    for _ in range(HUGE // len(chunk)):
                        self.wfile.write(chunk)
                        flood.sent += len(chunk)
                except OSError:  # the client stopped reading: what it should do
                    pass

            def _challenged(self) -> bool:
                if not flood.bearer or self.headers.get("Authorization"):
                    return False
                self.send_response(401)
                self.send_header("WWW-Authenticate", f'Bearer realm="http://{flood.host}/token"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=[False, True], ids=["manifest", "token"])
def flood(request: pytest.FixtureRequest) -> Iterator[Flood]:
    server = Flood(bearer=request.param)
    yield server
    server.close()


def test_an_endless_answer_is_refused_at_its_bound(flood: Flood) -> None:
    ref = ImageRef.parse(f"{flood.host}/demo/web:stable")
    access = RegistryAccess(insecure=True)
    with (
        RegistryClient(access=lambda _r: access, timeout=30, retry=RetryPolicy(attempts=1)) as client,
        pytest.raises(RegistryError, match=r"over \d+ bytes") as caught,
    ):
        client.resolve(ref)
    assert not caught.value.transient  # not retried: it would be as large again
    assert flood.sent < HUGE // 2  # the client stopped reading long before the end
