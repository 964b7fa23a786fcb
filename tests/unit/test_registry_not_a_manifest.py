"""A 200 to a manifest request that is no manifest: a proxy's or a login portal's HTML page, a JSON
error document, served where the registry should be, without a Docker-Content-Digest. Before,
the GET fallback took the sha256 of whatever came back as the tag's digest, and tagpin pinned the
workloads to an image that does not exist. Now it is an error that says what came back; a
manifest served as plain JSON (``schemaVersion`` 2, no media type anywhere) still resolves."""

from __future__ import annotations

import hashlib

import pytest
from tagpin.adapters.registry.http import Headers, HttpResponse
from tagpin.ports.registry import RegistryError

from tests.unit.test_registry_deep_json import REF, client

OCI_MANIFEST_PLAIN = b'{"schemaVersion": 2, "config": {}, "layers": []}'


def served(content_type: str, body: bytes) -> HttpResponse:
    return HttpResponse(200, Headers([("Content-Type", content_type)]), body)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/html; charset=utf-8", b"<html><body>Please sign in</body></html>"),
        ("application/json", b'{"errors": [{"code": "UNKNOWN"}]}'),
        ("application/json", b"[]"),
        ("", b""),
    ],
    ids=["html", "json-error", "json-array", "empty"],
)
def test_an_answer_that_is_no_manifest_is_an_error_not_a_digest(content_type: str, body: bytes) -> None:
    with client(lambda _u, _a: served(content_type, body)) as c, pytest.raises(RegistryError) as caught:
        c.resolve(REF)
    assert "not a manifest" in str(caught.value)
    assert not caught.value.transient


def test_a_manifest_served_as_plain_json_still_resolves() -> None:
    with client(lambda _u, _a: served("application/json", OCI_MANIFEST_PLAIN)) as c:
        resolution = c.resolve(REF)
    assert resolution.digest == "sha256:" + hashlib.sha256(OCI_MANIFEST_PLAIN).hexdigest()
