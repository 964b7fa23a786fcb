"""JSON nested past Python's parser depth, from a registry (a manifest or index any Go registry
accepts: its decoder allows 10,000 levels, Python's about 1,000; a tag-list page; a token answer;
a signature's payload or bundle): each is what a body that is not JSON is where it is read (no
index, a malformed page, no token, a malformed signature), never a ``RecursionError`` that fails
the poller's tag, the consumer's change or a verification with a Python traceback."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable

import pytest
from tagpin.adapters.registry.artifacts import index_descriptors
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.http import Headers, HttpRequest, HttpResponse
from tagpin.adapters.signatures import cosign
from tagpin.adapters.signatures.bundles import verify_bundle
from tagpin.adapters.signatures.intoto import statement_subjects
from tagpin.adapters.signatures.reading import candidate_layers
from tagpin.domain.channels import FollowedKey
from tagpin.domain.platforms import config_platform, index_platforms
from tagpin.domain.refs import Digest, ImageRef
from tagpin.ports.registry import AuthError, RegistryAccess, RegistryError
from tagpin.usecases.admission.platform import PlatformGate
from tagpin.usecases.attestations import platform_manifests

DEPTH = 100_000
DEEP = b'{"schemaVersion": 2, "x": ' + b"[" * DEPTH + b"]" * DEPTH + b"}"
REF = ImageRef.parse("registry.example.com/demo/web:stable")


class Transport:
    """Answers every request from ``answer(url, Authorization)``."""

    def __init__(self, answer: Callable[[str, str], HttpResponse]) -> None:
        self.answer = answer

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        return self.answer(request.url, request.headers.get("Authorization", ""))

    async def close(self) -> None:
        pass


async def no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


def client(answer: Callable[[str, str], HttpResponse]) -> RegistryClient:
    return RegistryClient(lambda _r: RegistryAccess(), Transport(answer), sleep=no_sleep)


def test_a_deep_manifest_resolves_to_the_digest_of_its_bytes() -> None:
    served_as = Headers([("Content-Type", "application/vnd.oci.image.manifest.v1+json")])
    with client(lambda _u, _a: HttpResponse(200, served_as, DEEP)) as c:  # HEAD: no digest; GET: DEEP
        resolution = c.resolve(REF)
    assert resolution.digest == "sha256:" + hashlib.sha256(DEEP).hexdigest()
    assert resolution.method == "GET"


def test_a_deep_tag_list_page_is_malformed() -> None:
    with (
        client(lambda _u, _a: HttpResponse(200, Headers(), DEEP)) as c,
        pytest.raises(RegistryError) as caught,
    ):
        c.list_tags(REF)
    assert "malformed tag list" in str(caught.value)


def test_a_deep_token_answer_is_no_token() -> None:
    challenge = Headers([("WWW-Authenticate", 'Bearer realm="https://auth.example.com/token"')])

    def answer(url: str, _authorization: str) -> HttpResponse:
        return (
            HttpResponse(200, Headers(), DEEP) if "auth.example.com" in url else HttpResponse(401, challenge)
        )

    with client(answer) as c, pytest.raises(AuthError, match="returned no token"):
        c.resolve(REF)


@pytest.mark.parametrize(
    "read",
    [index_descriptors, index_platforms, config_platform, platform_manifests, statement_subjects],
    ids=lambda f: f.__name__,
)
def test_a_deep_document_is_not_one(read: Callable[[bytes], object]) -> None:
    assert read(DEEP) is None


def test_a_deep_manifest_has_no_candidate_layers_and_deep_signatures_are_malformed() -> None:
    assert candidate_layers(DEEP, 10) is None
    signed = cosign._payload_verdict(DEEP, "sha256:" + "a" * 64, "the signature", "key-1")
    assert not signed.ok and signed.reason is not None
    verdict = verify_bundle(DEEP, None, None, "the bundle")  # type: ignore[arg-type]  # not reached
    assert not verdict.ok and "not a Sigstore bundle" in verdict.detail


class Manifests:
    """A registry that serves ``DEEP`` as every manifest (a single-platform one: it is no index)."""

    def fetch_manifest(self, ref: ImageRef, *, max_bytes: int | None = None) -> tuple[str, bytes]:
        return "application/vnd.oci.image.manifest.v1+json", DEEP

    def fetch_blob(self, ref: ImageRef, digest: str, max_bytes: int) -> bytes:
        raise AssertionError("a manifest that is not readable names no config to fetch")


def test_the_platform_gate_reads_a_deep_manifest_as_naming_no_platform() -> None:
    gate = PlatformGate(Manifests(), lambda _c: None, lambda: {}, lambda: 0)  # type: ignore[arg-type, return-value]
    assert (
        gate.provided(FollowedKey("registry.example.com/demo/web:stable"), Digest("sha256:" + "c" * 64))
        is None
    )
