"""Tag listing without a network: Link parsing, which links are followed, the breaker, and the fake."""

from __future__ import annotations

import asyncio
import json

import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.http import Headers, HttpRequest, HttpResponse
from tagpin.adapters.registry.resilience import RetryPolicy
from tagpin.adapters.registry.tags import TagLimits, next_link, own_link, page_url
from tagpin.domain.refs import ImageRef, is_tag
from tagpin.ports.registry import (
    RegistryAccess,
    RegistryError,
    RegistryUnavailable,
    RepositoryNotFound,
    TagListing,
)

from tests.support.registry import ScriptedRegistry

BASE = "https://registry.example.com"
PATH = "/v2/team/app/tags/list"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (['</v2/team/app/tags/list?n=100&last=b>; rel="next"'], "/v2/team/app/tags/list?n=100&last=b"),
        (["</a?x=1>; rel=next"], "/a?x=1"),
        (['<https://h/prev>; rel="prev", <https://h/next>; rel="next"'], "https://h/next"),
        (['<https://h/p>; title="a, b; c"; rel="last next"'], "https://h/p"),
        (['<https://h/p>; REL="Next"'], "https://h/p"),
        (['<https://h/first>; rel="first"', '<https://h/n2>; rel="next"'], "https://h/n2"),
        (['<https://h/p>; rel="prev"'], None),
        (["</broken; rel=next"], None),
        ([], None),
    ],
)
def test_next_link(values: list[str], expected: str | None) -> None:
    assert next_link(values) == expected


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        (f"{BASE}{PATH}?n=10&last=a", True),
        (f"https://REGISTRY.example.com:443{PATH}?n=10", True),
        (f"http://registry.example.com{PATH}?n=10", False),  # downgraded scheme
        (f"https://registry.example.com:8443{PATH}", False),
        (f"https://evil.example.com{PATH}", False),
        (f"https://registry.example.com.evil.example{PATH}", False),
        (f"https://u:p@registry.example.com{PATH}", False),
        (f"{BASE}/v2/team/other/tags/list", False),
        (f"{BASE}/token?scope=x", False),
        ("https://registry.example.com:99999/v2/x", False),  # an invalid port
    ],
)
def test_own_link(url: str, ok: bool) -> None:
    assert own_link(url, BASE, PATH) is ok


def test_page_url_and_is_tag() -> None:
    assert page_url(BASE, PATH, 1000) == f"{BASE}{PATH}?n=1000"
    assert page_url(BASE, PATH, 10, "v1.2+x") == f"{BASE}{PATH}?n=10&last=v1.2%2Bx"
    assert page_url(BASE, PATH, None) == f"{BASE}{PATH}"
    assert is_tag("a" * 128) and not is_tag("a" * 129) and not is_tag("v1\n") and not is_tag(1)
    with pytest.raises(ValueError, match="positive"):
        TagLimits(page_size=0)


class Scripted:
    """A transport answering tag-list requests from a list of responses (the last one repeats)."""

    def __init__(self, *answers: HttpResponse) -> None:
        self.answers = list(answers)
        self.sent: list[HttpRequest] = []

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        self.sent.append(request)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    async def close(self) -> None:
        pass


def ok(tags: list[str], link: str | None = None) -> HttpResponse:
    headers = [("Content-Type", "application/json")] + ([("Link", f'<{link}>; rel="next"')] if link else [])
    return HttpResponse(200, Headers(headers), json.dumps({"name": "team/app", "tags": tags}).encode())


async def no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


def client(transport: Scripted, **kw: object) -> RegistryClient:
    return RegistryClient(
        lambda _h: RegistryAccess(),
        transport,
        retry=RetryPolicy(attempts=2, base=0.0, cap=0.0),
        sleep=no_sleep,
        **kw,  # type: ignore[arg-type]
    )


REF = ImageRef.parse("registry.example.com/team/app:ignored")


def test_pages_go_out_bounded_and_accepting_json() -> None:
    transport = Scripted(ok(["a", "b"], link=f"{PATH}?n=2&last=b"), ok(["c"]))
    with client(transport) as c:
        found = c.list_tags(REF, limits=TagLimits(page_size=2))
    assert found == TagListing(ImageRef("registry.example.com", "team/app"), ("a", "b", "c"), 2, 2)
    assert [r.url for r in transport.sent] == [f"{BASE}{PATH}?n=2", f"{BASE}{PATH}?n=2&last=b"]
    assert {r.headers["Accept"] for r in transport.sent} == {"application/json"}
    assert {r.max_body for r in transport.sent} == {TagLimits().max_page_bytes}


def test_failures_open_the_breaker_and_malformed_pages_do_not() -> None:
    down = HttpResponse(503, Headers())
    with client(Scripted(down), breaker_threshold=2) as c:
        for _ in range(2):
            with pytest.raises(RegistryError, match="HTTP 503 listing the tags of team/app"):
                c.list_tags(REF)
        with pytest.raises(RegistryUnavailable):
            c.list_tags(REF)
    malformed = HttpResponse(200, Headers(), b'{"tags": "not a list"}')
    with client(Scripted(malformed), breaker_threshold=1) as c:
        for _ in range(2):
            with pytest.raises(RegistryError, match="malformed tag list") as caught:
                c.list_tags(REF)
            assert not caught.value.transient
    for empty in (b'{"tags": null}', b'{"name": "team/app"}'):
        with client(Scripted(HttpResponse(200, Headers(), empty))) as c:
            assert c.list_tags(REF).tags == ()
    html = HttpResponse(200, Headers(), b"<html>proxy error</html>")
    with client(Scripted(html)) as c, pytest.raises(RegistryError, match="malformed tag list"):
        c.list_tags(REF)


def test_scripted_registry_lists_tags() -> None:
    registry = ScriptedRegistry({"r.example/team/app:v1": "sha256:" + "a" * 64, "r.example/team/app:v2": "x"})
    found = registry.list_tags(ImageRef.parse("r.example/team/app"))
    assert (found.tags, found.truncated) == (("v1", "v2"), False)
    cut = TagListing(ImageRef("r.example", "big/repo"), ("a",), pages=1000, requests=1000, end="max-pages")
    registry.tag_lists["r.example/big/repo"] = cut
    assert registry.list_tags(ImageRef.parse("r.example/big/repo")).truncated
    with pytest.raises(RepositoryNotFound):
        registry.list_tags(ImageRef.parse("r.example/none/here"))
    registry.down["r.example"] = RegistryError("down", host="r.example")
    with pytest.raises(RegistryError, match="down"):
        registry.list_tags(ImageRef.parse("r.example/team/app"))
    assert registry.listed == [f"r.example/{n}" for n in ("team/app", "big/repo", "none/here", "team/app")]
