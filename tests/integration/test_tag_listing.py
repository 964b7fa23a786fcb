"""RegistryClient.list_tags against the real CNCF registry and small fake tag-list endpoints (127.0.0.1).

Debian's docker-registry (distribution 2.8.2) ignores ``n`` and ``last`` on ``/tags/list`` and sends
every tag in one unsorted page without a Link (distribution/distribution#1936). What paginating
registries do (Link, page caps, ``last`` without Link, loops, foreign Links, odd tags) is served by
``FakeTags`` below from their own tags, or by ``tagpin_local.tagpager.TagPager`` from the real
registry's tags (what a distribution 3 / OCI-conformant registry sends).
"""

from __future__ import annotations

import gzip
import http.server
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.resilience import RetryPolicy
from tagpin.adapters.registry.tags import TagLimits
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import Credentials, RegistryAccess, RegistryError, RepositoryNotFound, TagListing
from tagpin_local.faultproxy import Fault, FaultProxy
from tagpin_local.oci import push_image, put_tags
from tagpin_local.registry_server import RegistryServer
from tagpin_local.tagpager import TagPager, spec_page
from tagpin_local.tokenserver import TokenServer

from tests.conftest import require_binary

pytestmark = pytest.mark.integration

MANY = [f"1.{i // 100}.{i % 100}" for i in range(2500)]  # 2,500 tags: 3 pages of 1,000 with a Link

type Answer = tuple[int, dict[str, str], bytes]


def page(tags: list[Any] | None, *, link: str | None = None, name: str = "x") -> Answer:
    headers = {"Content-Type": "application/json"} | ({"Link": f'<{link}>; rel="next"'} if link else {})
    return 200, headers, json.dumps({"name": name, "tags": tags}).encode()


@dataclass
class FakeTags:
    """A tag-list endpoint on 127.0.0.1: ``serve(path, query)`` answers each GET; every request's
    path and query are recorded in ``seen``."""

    serve: Callable[[str, dict[str, str]], Answer]
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.seen.append(self.path)
                parts = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                status, headers, body = fake.serve(parts.path, query)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def queries(self) -> list[dict[str, str]]:
        return [{k: v[-1] for k, v in parse_qs(urlsplit(p).query).items()} for p in self.seen]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fakes() -> Iterator[Callable[[Callable[[str, dict[str, str]], Answer]], FakeTags]]:
    started: list[FakeTags] = []

    def start(serve: Callable[[str, dict[str, str]], Answer]) -> FakeTags:
        started.append(FakeTags(serve))
        return started[-1]

    yield start
    for fake in started:
        fake.close()


def spec_pager(
    tags: Callable[[], list[str]], *, cap: int | None = None, link: bool = True
) -> Callable[[str, dict[str, str]], Answer]:
    """A registry that paginates as the OCI spec says (``tagpin_local.tagpager.spec_page``)."""

    def serve(path: str, query: dict[str, str]) -> Answer:
        chunk, target = spec_page(tags(), query, path, cap=cap, link=link)
        return page(chunk, link=target)

    return serve


def client(**kw: Any) -> RegistryClient:
    kw.setdefault("retry", RetryPolicy(attempts=3, base=0.01, cap=0.05))
    access = kw.pop("access", RegistryAccess(insecure=True))
    return RegistryClient(access=lambda _host: access, **kw)


def listing(host: str, repository: str = "team/app", **kw: Any) -> TagListing:
    limits = kw.pop("limits", None)
    with client(**kw) as c:
        return c.list_tags(ImageRef.parse(f"{host}/{repository}"), limits=limits)


# --- the real registry ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryServer]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with RegistryServer() as server:
        yield server


@pytest.fixture(scope="module")
def many(registry: RegistryServer) -> list[str]:
    """2,500 tags of one manifest in tags/many: one push, then 2,499 manifest PUTs in parallel."""
    started = time.monotonic()
    push_image(registry.url, "tags/many", MANY[0], content=b"many")
    put_tags(registry.url, "tags/many", MANY[0], MANY[1:])
    print(f"\n2,500 tags pushed in {time.monotonic() - started:.1f}s")
    return MANY


def test_a_few_tags(registry: RegistryServer) -> None:
    names = ["latest", "v1", "v1.2.3", "1.0.0-rc.1", "stable_2026"]
    push_image(registry.url, "tags/few", names[0], content=b"few")
    put_tags(registry.url, "tags/few", names[0], names[1:])
    found = listing(registry.host, "tags/few")
    assert set(found.tags) == set(names) and len(found.tags) == len(names)
    assert (found.pages, found.requests, found.end, found.dropped) == (1, 1, "complete", 0)
    assert not found.truncated
    assert found.repository == ImageRef(registry.host, "tags/few")


def test_unknown_repository(registry: RegistryServer) -> None:
    with pytest.raises(RepositoryNotFound):
        listing(registry.host, "tags/nothing-here")


def test_real_registry_ignores_n_one_page(registry: RegistryServer, many: list[str]) -> None:
    """distribution 2.8.2 answers n=1000 with all 2,500 tags at once: one request, nothing lost."""
    found = listing(registry.host, "tags/many", limits=TagLimits(page_size=1000))
    assert set(found.tags) == set(many) and len(found.tags) == 2500
    assert (found.pages, found.requests, found.end) == (1, 1, "complete")


def test_link_pagination_over_the_real_tags(registry: RegistryServer, many: list[str]) -> None:
    """The real registry's 2,500 tags served as a paginating registry does: 3 pages of up to 1,000,
    each next page named by a relative Link, which is followed."""
    with TagPager(registry.url) as pager:
        found = listing(pager.host, "tags/many", limits=TagLimits(page_size=1000))
    assert set(found.tags) == set(many) and len(found.tags) == 2500
    assert list(found.tags) == sorted(many)
    assert (found.pages, found.requests, found.end) == (3, 3, "complete")
    ordered = sorted(many)
    assert pager.requests == [
        "/v2/tags/many/tags/list?n=1000",
        f"/v2/tags/many/tags/list?n=1000&last={ordered[999]}",
        f"/v2/tags/many/tags/list?n=1000&last={ordered[1999]}",
    ]


def test_max_tags_bound_truncates(registry: RegistryServer, many: list[str]) -> None:
    with TagPager(registry.url) as pager:
        found = listing(pager.host, "tags/many", limits=TagLimits(page_size=1000, max_tags=1500))
    assert (len(found.tags), found.pages, found.end, found.truncated) == (1500, 2, "max-tags", True)
    assert list(found.tags) == sorted(many)[:1500]
    one_page = listing(registry.host, "tags/many", limits=TagLimits(max_tags=1000))  # one page over the bound
    assert (len(one_page.tags), one_page.pages, one_page.end) == (1000, 1, "max-tags")


def test_retry_after_is_honoured(registry: RegistryServer) -> None:
    """A 429 with Retry-After: 1 in front of the real registry, then the answer: retried after
    about a second (measured and printed, not asserted tightly)."""
    push_image(registry.url, "tags/limited", "v1", content=b"limited")
    with FaultProxy(registry.url) as proxy:
        proxy.add(Fault("status", 429, {"Retry-After": "1"}, times=1, match="/tags/list"))
        started = time.monotonic()
        found = listing(proxy.host, "tags/limited", retry=RetryPolicy(attempts=3, base=0.01, cap=0.05))
        elapsed = time.monotonic() - started
        print(f"\n429 + Retry-After: 1 -> listed after {elapsed:.2f}s")
        assert [w for _m, _p, w in proxy.seen()] == ["status", "forward"]
    assert (found.tags, found.pages, found.requests, found.end) == (("v1",), 1, 2, "complete")
    assert elapsed >= 0.5  # waited, rather than retrying at once (1 s asked; no upper bound asserted)


def test_bearer_token_flow(caplog: pytest.LogCaptureFixture) -> None:
    """Against the real registry with token auth: 401, a token for repository:<name>:pull fetched
    with the credentials, the page retried with it; no secret in any log line."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    users = {"alice": "alice-s3cret", "pusher": "push-s3cret"}
    with TokenServer(users) as tokens, RegistryServer(auth=tokens.registry_auth()) as secured:
        for tag in ("v1", "v2"):
            push_image(secured.url, "auth/tags", tag, content=b"auth", auth=("pusher", "push-s3cret"))
        access = RegistryAccess(insecure=True, credentials=Credentials("alice", "alice-s3cret"))
        before = len(tokens.requests)
        with caplog.at_level(logging.DEBUG, logger="tagpin"), client(access=access) as c:
            ref = ImageRef.parse(f"{secured.host}/auth/tags")
            found = c.list_tags(ref)
            again = c.list_tags(ref)  # the cached token goes along at once
        fetched = tokens.requests[before:]
        issued_token = c._auth.tokens and next(iter(c._auth.tokens.values()))[0]
    assert set(found.tags) == {"v1", "v2"} and set(again.tags) == {"v1", "v2"}
    assert [(r.user, r.scopes, r.status) for r in fetched] == [("alice", ("repository:auth/tags:pull",), 200)]
    assert (found.requests, again.requests) == (3, 1)  # 401 + token + retry; then one GET
    logged = caplog.text
    assert "alice-s3cret" not in logged and issued_token and issued_token not in logged


# --- registries that paginate otherwise (fakes) ------------------------------------------------------


def test_registry_that_ignores_n(fakes: Any) -> None:
    tags = [f"t{i:04d}" for i in range(1500)][::-1]  # more than n, in no particular order
    fake = fakes(lambda _path, _query: page(tags))
    found = listing(fake.host, limits=TagLimits(page_size=1000))
    assert list(found.tags) == tags and (found.pages, found.requests, found.end) == (1, 1, "complete")


def test_registry_that_caps_pages_at_100_with_an_opaque_link(fakes: Any) -> None:
    """Pages of 100 whatever n asks for (GHCR's default, Quay's 50), the next one named by an
    opaque cursor (Quay's next_page): shorter pages than n do not end the listing."""
    tags = [f"v{i:03d}" for i in range(250)]

    def serve(path: str, query: dict[str, str]) -> Answer:
        start = int(bytes.fromhex(query["next_page"]).decode()) if "next_page" in query else 0
        end = start + 100
        cursor = f"{path}?{urlencode({'next_page': str(end).encode().hex(), 'n': 100})}"
        return page(tags[start:end], link=cursor if end < len(tags) else None)

    fake = fakes(serve)
    found = listing(fake.host, limits=TagLimits(page_size=1000))
    assert list(found.tags) == tags and (found.pages, found.requests, found.end) == (3, 3, "complete")
    assert fake.queries()[0] == {"n": "1000"} and "next_page" in fake.queries()[1]


def test_registry_that_paginates_by_last_without_link(fakes: Any) -> None:
    tags = [f"r{i:04d}" for i in range(2500)]
    fake = fakes(spec_pager(lambda: tags, link=False))
    found = listing(fake.host, limits=TagLimits(page_size=1000))
    assert list(found.tags) == tags and (found.pages, found.end) == (3, "complete")
    assert [q.get("last") for q in fake.queries()] == [None, "r0999", "r1999"]
    exact = fakes(spec_pager(lambda: tags[:2000], link=False))  # a multiple of n: one empty page more
    found = listing(exact.host, limits=TagLimits(page_size=1000))
    assert len(found.tags) == 2000 and (found.pages, found.end) == (3, "complete")


def test_registry_that_ignores_last_ends_after_one_more_page(fakes: Any) -> None:
    """Exactly n tags and no Link: asked once more with last=, the same page comes back: the end."""
    tags = [f"s{i:03d}" for i in range(100)]
    fake = fakes(lambda _path, _query: page(tags))
    found = listing(fake.host, limits=TagLimits(page_size=100))
    assert list(found.tags) == tags and (found.pages, found.end) == (2, "complete")


@pytest.mark.parametrize("shape", ["same-page", "cycle", "self-link", "same-last"])
def test_registry_that_loops_is_stopped(fakes: Any, shape: str) -> None:
    first, second = [f"a{i:02d}" for i in range(10)], [f"b{i:02d}" for i in range(10)]
    path = "/v2/team/app/tags/list"

    def serve(_path: str, query: dict[str, str]) -> Answer:
        if shape == "same-page":  # every page the same, each with a new-looking Link
            return page(first, link=f"{path}?n=10&cursor={len(fake.seen)}")
        if shape == "cycle":  # page 1 -> page 2 -> page 1 ...
            return page(second, link=f"{path}?n=10") if query.get("p") else page(first, link=f"{path}?p=2")
        if shape == "self-link":
            return page(first, link=f"{path}?n=10")
        # pages of exactly n without a Link whose last tag never advances (one new tag each time)
        return page([second[len(fake.seen)], *first[1:]] if query.get("last") else first)

    fake = fakes(serve)
    found = listing(fake.host, limits=TagLimits(page_size=10))
    pages = {"same-page": 2, "cycle": 2, "self-link": 1, "same-last": 2}[shape]
    assert (found.end, found.truncated, found.pages, len(fake.seen)) == ("loop", True, pages, pages)
    assert set(first) <= set(found.tags)


@pytest.mark.parametrize(
    "where", ["other-host", "other-port", "other-scheme", "other-repository", "userinfo"]
)
def test_link_off_the_registry_is_refused(fakes: Any, where: str) -> None:
    """The next page named on another host (or scheme, port, repository): not followed, since the
    registry's token would go along; the listing stops there and says so."""
    elsewhere = fakes(lambda _path, _query: page(["stolen"]))
    origin: dict[str, str] = {}

    def serve(path: str, _query: dict[str, str]) -> Answer:
        target = {
            "other-host": f"http://localhost:{origin['port']}{path}?n=5&last=v4",
            "other-port": f"http://{elsewhere.host}{path}?n=5&last=v4",
            "other-scheme": f"https://{origin['host']}{path}?n=5&last=v4",
            "other-repository": "/v2/someone/else/tags/list?n=5&last=v4",
            "userinfo": f"http://user:pw@{origin['host']}{path}?n=5&last=v4",
        }[where]
        return page([f"v{i}" for i in range(5)], link=target)

    fake = fakes(serve)
    origin.update(host=fake.host, port=fake.host.rsplit(":", 1)[1])
    found = listing(fake.host, limits=TagLimits(page_size=5))
    assert found.tags == tuple(f"v{i}" for i in range(5))
    assert (found.pages, found.requests, found.end, found.truncated) == (1, 1, "refused-link", True)
    assert len(fake.seen) == 1 and elsewhere.seen == []


def test_invalid_tags_are_dropped(fakes: Any, caplog: pytest.LogCaptureFixture) -> None:
    longest, too_long = "a" * 128, "b" * 129
    odd: list[Any] = [
        "ok-1",
        "bad tag",
        "-leading-dash",
        ".leading-dot",
        "ünïcode",
        "a/b",
        "new\nline",
        too_long,
        "",
        42,
        None,
        {"tag": "x"},
        longest,
        "_under.score-9",
        "ok-1",  # a repeat: kept once, not counted as dropped
    ]
    fake = fakes(lambda _path, _query: page(odd))
    with caplog.at_level(logging.WARNING, logger="tagpin"):
        found = listing(fake.host)
    assert found.tags == ("ok-1", longest, "_under.score-9")
    assert found.dropped == 11 and found.end == "complete"
    assert "dropped 11 invalid tag(s)" in caplog.text and too_long not in caplog.text


def test_bounds_on_pages_and_page_size(fakes: Any) -> None:
    tags = [f"p{i:04d}" for i in range(1000)]
    capped = fakes(spec_pager(lambda: tags, cap=100))
    found = listing(capped.host, limits=TagLimits(page_size=1000, max_pages=3))
    assert (len(found.tags), found.pages, found.end) == (300, 3, "max-pages")
    huge = fakes(lambda _path, _query: page(tags * 30))  # about 300 KB
    with pytest.raises(RegistryError, match="over 100000 bytes") as caught:
        listing(huge.host, limits=TagLimits(max_page_bytes=100_000))
    assert not caught.value.transient  # not retried: it would be as large again
    assert len(huge.seen) == 1


def test_gzip_page_is_decoded(fakes: Any) -> None:
    tags = [f"g{i:03d}" for i in range(300)]

    def serve(_path: str, _query: dict[str, str]) -> Answer:
        status, headers, body = page(tags)
        return status, headers | {"Content-Encoding": "gzip"}, gzip.compress(body)

    fake = fakes(serve)
    assert listing(fake.host).tags == tuple(tags)


def test_n_refused_is_asked_again_without_n(fakes: Any) -> None:
    def serve(_path: str, query: dict[str, str]) -> Answer:
        if "n" in query:
            return (
                400,
                {"Content-Type": "application/json"},
                b'{"errors":[{"code":"PAGINATION_NUMBER_INVALID"}]}',
            )
        return page(["only", "these"])

    fake = fakes(serve)
    found = listing(fake.host)
    assert (found.tags, found.pages, found.requests) == (("only", "these"), 1, 2)
    assert fake.queries() == [{"n": "1000"}, {}]


def test_rate_limit_headers_and_5xx_retry(fakes: Any) -> None:
    calls: list[int] = []

    def serve(_path: str, _query: dict[str, str]) -> Answer:
        calls.append(1)
        if len(calls) == 1:
            return 503, {}, b""
        status, headers, body = page(["v1"])
        return status, headers | {"RateLimit-Limit": "100;w=21600", "RateLimit-Remaining": "99;w=21600"}, body

    fake = fakes(serve)
    found = listing(fake.host)
    assert (found.tags, found.requests) == (("v1",), 2)
    assert found.rate_limit == {"ratelimit-limit": "100;w=21600", "ratelimit-remaining": "99;w=21600"}
