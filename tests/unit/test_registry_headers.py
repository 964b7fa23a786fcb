"""Response headers as the registry client reads them: built from pairs (in-memory transports) or
over aiohttp's own case-insensitive multi-dict (the production transport), the same answers."""

import pytest
from multidict import CIMultiDict, CIMultiDictProxy
from tagpin.adapters.registry.http import Headers

PAIRS = [
    ("Docker-Content-Digest", "sha256:" + "a" * 64),
    ("Content-Type", "application/vnd.oci.image.index.v1+json"),
    ("WWW-Authenticate", 'Bearer realm="https://auth.example.com/token"'),
    ("www-authenticate", 'Basic realm="registry"'),
]


def built(kind: str) -> Headers:
    if kind == "pairs":
        return Headers(PAIRS)
    return Headers.view(CIMultiDictProxy(CIMultiDict(PAIRS)))


@pytest.mark.parametrize("kind", ["pairs", "view"])
def test_lookups_ignore_case_and_keep_every_value(kind: str) -> None:
    headers = built(kind)
    assert headers.get("docker-content-digest") == "sha256:" + "a" * 64
    assert headers.get("CONTENT-TYPE") == "application/vnd.oci.image.index.v1+json"
    assert headers.get_list("Www-Authenticate") == [
        'Bearer realm="https://auth.example.com/token"',
        'Basic realm="registry"',
    ]
    assert "content-type" in headers and "Content-Type" in headers
    assert "retry-after" not in headers and 42 not in headers
    assert headers.get("retry-after") == "" and headers.get("retry-after", "x") == "x"
    assert headers.get_list("retry-after") == []


def test_a_view_reads_through_and_its_list_is_a_copy() -> None:
    source = CIMultiDict(PAIRS)
    headers = Headers.view(CIMultiDictProxy(source))
    values = headers.get_list("www-authenticate")
    values.clear()
    assert len(headers.get_list("www-authenticate")) == 2
