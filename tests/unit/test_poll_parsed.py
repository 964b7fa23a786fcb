"""What a warm container's polls parse once: each followed tag's reference (the Poller keeps the
last run's) and each manifest URL (the aiohttp transport keeps them parsed, within a bound). The
answers are the same; only the work is not redone."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tagpin.adapters.registry import http
from tagpin.adapters.registry.http import AiohttpTransport, HttpRequest, LoopThread
from tagpin.domain.config import FollowedImage, Target
from tagpin.ports.state import State

from tests.support.parses import counted_parses
from tests.support.queues import ListQueue
from tests.unit.test_poll import digest, poller, scripted

A = "registry-a.example"


def test_a_followed_tag_is_parsed_once_across_runs(store: State, monkeypatch: pytest.MonkeyPatch) -> None:
    images = [f"{A}/team/app{i}:stable" for i in range(3)]
    registry = scripted({image: digest(i) for i, image in enumerate(images)})
    followed = [
        FollowedImage(image=image, targets=[Target(cluster="c", name=f"app{i}", container="app")])
        for i, image in enumerate(images)
    ]
    parsed = counted_parses(monkeypatch)
    polls = poller(registry, store, ListQueue())
    first = polls.run(followed)
    assert sorted(parsed) == images
    parsed.clear()
    second = polls.run(followed)
    assert parsed == []  # the same tags: their references from the run before
    assert sorted(registry.calls) == sorted(images * 2)  # each resolved at every run all the same
    assert (first.changed, second.unchanged) == (3, 3)
    new = FollowedImage(image=f"{A}/team/new:1", targets=[Target(cluster="c", name="n", container="app")])
    polls.run([*followed[:1], new])
    assert set(parsed) == {f"{A}/team/new:1"}  # only a tag the run before did not follow


class _Manifests(BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Docker-Content-Digest", digest(1))
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Manifests)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_the_transport_parses_a_url_once_within_its_bound(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http, "PARSED_URLS", 2)
    transport = AiohttpTransport()
    loop = LoopThread()
    urls = [f"{server}/v2/team/app/manifests/t{i}" for i in range(3)]

    def head(url: str) -> int:
        response = loop.submit(transport.send(HttpRequest("HEAD", url, {}), 5.0)).result(timeout=10)
        return response.status

    try:
        assert [head(urls[0]), head(urls[1])] == [200, 200]
        kept = dict(transport._urls)
        assert [str(u) for u in kept.values()] == urls[:2]
        assert head(urls[0]) == 200
        assert transport._urls[urls[0]] is kept[urls[0]]  # parsed once, used again
        assert head(urls[2]) == 200  # past the bound: the others are dropped
        assert list(transport._urls) == [urls[2]]
    finally:
        loop.submit(transport.close()).result(timeout=10)
        loop.stop()
