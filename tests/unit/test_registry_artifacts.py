"""RegistryClient.fetch_blob and .referrers against an in-memory transport: the referrers API and
its fallback to the tag schema, pagination and its refusals, untrusted descriptors, digests, and the
breaker. (The real registry: tests/integration/test_signatures_real.py.)"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable

import pytest
from tagpin.adapters.registry.artifacts import ArtifactLimits, referrers_tag
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.http import Headers, HttpRequest, HttpResponse
from tagpin.adapters.registry.resilience import RetryPolicy
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import (
    OCI_INDEX,
    AuthError,
    BlobNotFound,
    ContentMismatch,
    RegistryAccess,
    RegistryError,
    RegistryUnavailable,
)

HOST = "registry.test"
REF = ImageRef(HOST, "team/app", "v1")
SUBJECT = "sha256:" + "a" * 64
BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"
BLOB = b"a signature payload"
BLOB_DIGEST = "sha256:" + hashlib.sha256(BLOB).hexdigest()

type Handler = Callable[[str], tuple[int, dict[str, str], bytes]]


class Transport:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.urls: list[str] = []

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        self.urls.append(request.url)
        status, headers, body = self.handler(request.url)
        return HttpResponse(status, Headers(headers.items()), body)

    async def close(self) -> None:
        pass


async def no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


def client(handler: Handler, **options: object) -> tuple[RegistryClient, Transport]:
    transport = Transport(handler)
    c = RegistryClient(
        lambda _r: RegistryAccess(),
        transport,
        sleep=no_sleep,
        retry=RetryPolicy(attempts=2),
        **options,  # type: ignore[arg-type]
    )
    return c, transport


def descriptor(n: int, artifact_type: str = BUNDLE) -> dict[str, object]:
    return {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": "sha256:" + f"{n:064x}",
        "size": 500 + n,
        "artifactType": artifact_type,
        "annotations": {"created": "today"},
    }


def index(*entries: object) -> bytes:
    return json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": list(entries)}).encode()


def test_fetch_blob_checks_the_digest() -> None:
    c, transport = client(lambda _url: (200, {}, BLOB))
    with c:
        assert c.fetch_blob(REF, BLOB_DIGEST, 1024) == BLOB
        assert transport.urls == [f"https://{HOST}/v2/team/app/blobs/{BLOB_DIGEST}"]
        with pytest.raises(ContentMismatch):
            c.fetch_blob(REF, "sha256:" + "b" * 64, 1024)
        with pytest.raises(ValueError, match="verifiable digest"):
            c.fetch_blob(REF, "md5:" + "b" * 32, 1024)


def test_fetch_blob_errors() -> None:
    statuses = iter([404, 403, 503, 503])
    c, _transport = client(lambda _url: (next(statuses), {}, b""))
    with c:
        with pytest.raises(BlobNotFound):
            c.fetch_blob(REF, BLOB_DIGEST, 1024)
        with pytest.raises(AuthError):
            c.fetch_blob(REF, BLOB_DIGEST, 1024)
        with pytest.raises(RegistryError) as failed:
            c.fetch_blob(REF, BLOB_DIGEST, 1024)  # 503 twice: the retries are spent
        assert failed.value.transient
        assert c.breaker(HOST).failures == 1


def test_transient_failures_open_the_breaker() -> None:
    c, transport = client(lambda _url: (503, {}, b""), breaker_threshold=2)
    with c:
        for _ in range(2):
            with pytest.raises(RegistryError):
                c.referrers(REF, SUBJECT)
        sent = len(transport.urls)
        with pytest.raises(RegistryUnavailable):
            c.fetch_blob(REF, BLOB_DIGEST, 1024)
        assert len(transport.urls) == sent


def test_the_referrers_api_filtered_here_too() -> None:
    """A registry may ignore ?artifactType=; descriptors of other types and malformed ones are left out."""
    body = index(
        descriptor(1),
        descriptor(2, "application/vnd.example.sbom"),
        {"digest": "sha256:nothex", "size": 1, "mediaType": "x"},
        {**descriptor(3), "size": -1},
        "not an object",
        descriptor(1),  # listed twice
    )
    c, transport = client(lambda _url: (200, {"Content-Type": OCI_INDEX}, body))
    with c:
        found = c.referrers(REF, SUBJECT, artifact_type=BUNDLE)
        assert [d.digest for d in found] == [descriptor(1)["digest"]]
        assert found[0].annotations == {"created": "today"}
        assert transport.urls == [
            f"https://{HOST}/v2/team/app/referrers/{SUBJECT}?artifactType=application%2Fvnd.dev.sigstore.bundle.v0.3%2Bjson"
        ]
        assert len(c.referrers(REF, SUBJECT)) == 2


@pytest.mark.parametrize(
    "answer",
    [(404, {}, b"404 page not found"), (200, {"Content-Type": "text/html"}, b"<html>"), (405, {}, b"")],
    ids=["404", "not an index", "405"],
)
def test_without_the_api_the_tag_schema(answer: tuple[int, dict[str, str], bytes]) -> None:
    tag_url = f"https://{HOST}/v2/team/app/manifests/{referrers_tag(SUBJECT)}"

    def handler(url: str) -> tuple[int, dict[str, str], bytes]:
        if url == tag_url:
            return 200, {"Content-Type": OCI_INDEX}, index(descriptor(4), descriptor(5, "other"))
        return answer

    c, transport = client(handler)
    with c:
        assert [d.digest for d in c.referrers(REF, SUBJECT, artifact_type=BUNDLE)] == [
            descriptor(4)["digest"]
        ]
        assert transport.urls[-1] == tag_url


def test_no_api_and_no_tag_means_no_referrers() -> None:
    c, _transport = client(lambda _url: (404, {}, b""))
    with c:
        assert c.referrers(REF, SUBJECT) == []


def test_pages_are_followed_on_the_same_origin_and_path_only() -> None:
    path = f"/v2/team/app/referrers/{SUBJECT}"
    pages = {
        f"https://{HOST}{path}": (index(descriptor(1)), f'<{path}?next=2>; rel="next"'),
        f"https://{HOST}{path}?next=2": (
            index(descriptor(2)),
            f'<https://elsewhere.test{path}?next=3>; rel="next"',
        ),
    }

    def handler(url: str) -> tuple[int, dict[str, str], bytes]:
        body, link = pages[url]
        return 200, {"Content-Type": OCI_INDEX, "Link": link}, body

    c, transport = client(handler)
    with c:
        assert len(c.referrers(REF, SUBJECT)) == 2
        assert not any("elsewhere" in u for u in transport.urls)  # the token would have gone with it


def test_referrers_are_bounded() -> None:
    body = index(*[descriptor(n) for n in range(10)])
    c, _transport = client(
        lambda _url: (200, {"Content-Type": OCI_INDEX}, body), artifact_limits=ArtifactLimits(max_referrers=3)
    )
    with c:
        assert len(c.referrers(REF, SUBJECT)) == 3


def test_a_referrers_page_refused_for_auth_raises() -> None:
    c, _transport = client(lambda _url: (403, {}, b""))
    with c, pytest.raises(AuthError):
        c.referrers(REF, SUBJECT)
