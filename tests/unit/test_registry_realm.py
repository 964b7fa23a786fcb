"""The token endpoint a registry's ``WWW-Authenticate`` challenge names (its realm) is the registry's
to choose, on another host too (Docker Hub's is auth.docker.io), and the configured credentials go
to it. Not in clear text: an HTTPS registry whose realm is plain ``http://`` gets no credentials
sent over it (a passive listener on the path would read them), and the resolution fails saying
why; an anonymous token is still fetched from it, and an ``insecure`` registry (plain HTTP itself)
keeps its ``http://`` realm."""

from __future__ import annotations

import asyncio
import base64

import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.http import Headers, HttpRequest, HttpResponse
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import AuthError, Credentials, RegistryAccess

DIGEST = "sha256:" + "b" * 64
SECRET = "hunter2-registry"
REF = ImageRef.parse("registry.example.com/demo/web:stable")


class Registry:
    """Challenges for a bearer token from ``realm``, answers ``TOKEN`` there and the manifest's
    digest to a request that carries it; records every request (url, its Authorization)."""

    def __init__(self, realm: str) -> None:
        self.realm = realm
        self.seen: list[tuple[str, str]] = []

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        given = request.headers.get("Authorization", "")
        self.seen.append((request.url, given))
        if request.url == self.realm:
            return HttpResponse(200, Headers(), b'{"token": "TOKEN"}')
        if given != "Bearer TOKEN":
            challenge = f'Bearer realm="{self.realm}",service="registry.example.com"'
            return HttpResponse(401, Headers([("WWW-Authenticate", challenge)]))
        return HttpResponse(200, Headers([("Docker-Content-Digest", DIGEST)]))

    async def close(self) -> None:
        pass


async def no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


def resolve(realm: str, access: RegistryAccess) -> tuple[Registry, str | Exception]:
    registry = Registry(realm)
    with RegistryClient(lambda _r: access, registry, sleep=no_sleep) as client:
        try:
            return registry, str(client.resolve(REF).digest)
        except AuthError as exc:
            return registry, exc


def test_credentials_go_to_an_https_realm_on_another_host() -> None:
    registry, found = resolve(
        "https://auth.example.net/token", RegistryAccess(credentials=Credentials("bob", SECRET))
    )
    assert found == DIGEST
    basic = "Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode()
    assert ("https://auth.example.net/token", basic) in registry.seen


def test_credentials_never_go_to_a_plain_http_realm_of_an_https_registry() -> None:
    realm = "http://auth.example.net/token"
    registry, found = resolve(realm, RegistryAccess(credentials=Credentials("bob", SECRET)))
    assert isinstance(found, AuthError)
    assert "http://" in str(found) and SECRET not in str(found)
    assert [given for url, given in registry.seen if url == realm] == []  # nothing sent in clear


@pytest.mark.parametrize(
    "access",
    [RegistryAccess(), RegistryAccess(insecure=True, credentials=Credentials("bob", SECRET))],
    ids=["anonymous", "insecure-registry"],
)
def test_a_plain_http_realm_serves_anonymous_and_insecure_registries(access: RegistryAccess) -> None:
    _registry, found = resolve("http://auth.example.net/token", access)
    assert found == DIGEST
