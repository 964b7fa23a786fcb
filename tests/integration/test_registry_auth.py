"""Credentials against the real registry configured for each kind of authentication (127.0.0.1 only):
htpasswd Basic auth, and bearer tokens from a token server (``tagpin_local.tokenserver``).

The credentials go the production way: a secret per registry in the configuration, read by the
``CredentialStore`` for the registry's kind (generic, Quay robot, ACR, GHCR, Artifact Registry key
or access token), handed to the ``RegistryClient``. ECR's token is tested through moto in
tests/unit/test_registry_credentials.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.credentials import CredentialStore
from tagpin.adapters.registry.resilience import RetryPolicy
from tagpin.domain.config import FollowedImage, Registry, RegistryKind, TagpinConfig, Target
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import OCI_MANIFEST, AuthError
from tagpin.ports.state import State
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller
from tagpin_local.oci import push_image
from tagpin_local.registry_server import RegistryServer, write_htpasswd
from tagpin_local.tokenserver import TokenServer

from tests.conftest import require_binary
from tests.support.clock import FakeClock
from tests.support.queues import ListQueue

pytestmark = pytest.mark.integration

SECRET = "tagpin/registries/registry"
GAR_KEY = {"type": "service_account", "project_id": "p", "private_key_id": "k1", "client_email": "a@p.iam"}
PUSHER = ("pusher", "push-password")
BASIC_USERS = {
    "alice": "alice-password",
    "org+robot": "ROBOTTOKEN",
    "acr-sp": "sp-secret",
    PUSHER[0]: PUSHER[1],
}
TOKEN_USERS = {
    **BASIC_USERS,
    "ghuser": "ghp_token",
    "_json_key": json.dumps(GAR_KEY, separators=(",", ":")),
    "oauth2accesstoken": "ya29.access-token",
}


@dataclass(frozen=True)
class Kind:
    kind: RegistryKind
    secret: dict[str, Any]
    user: str


KINDS = {
    "generic": Kind(RegistryKind.GENERIC, {"username": "alice", "password": "alice-password"}, "alice"),
    "quay-robot": Kind(RegistryKind.QUAY, {"username": "org+robot", "password": "ROBOTTOKEN"}, "org+robot"),
    "acr-service-principal": Kind(RegistryKind.ACR, {"username": "acr-sp", "token": "sp-secret"}, "acr-sp"),
    "ghcr": Kind(RegistryKind.GHCR, {"username": "ghuser", "token": "ghp_token"}, "ghuser"),
    "gar-json-key": Kind(RegistryKind.GAR, {"_json_key": GAR_KEY}, "_json_key"),
    "gar-key-file": Kind(RegistryKind.GAR, GAR_KEY, "_json_key"),
    "gar-access-token": Kind(RegistryKind.GAR, {"access_token": "ya29.access-token"}, "oauth2accesstoken"),
}
BASIC_KINDS = ["generic", "quay-robot", "acr-service-principal"]  # bcrypt: passwords up to 72 bytes


@pytest.fixture(scope="module")
def token_server() -> Iterator[TokenServer]:
    with TokenServer(TOKEN_USERS) as server:
        yield server


@pytest.fixture(scope="module")
def token_registry(token_server: TokenServer) -> Iterator[RegistryServer]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with RegistryServer(auth=token_server.registry_auth()) as server:
        yield server


@pytest.fixture(scope="module")
def basic_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    auth = write_htpasswd(tmp_path_factory.mktemp("htpasswd") / "htpasswd", BASIC_USERS)
    with RegistryServer(auth=auth) as server:
        yield server


@pytest.fixture(scope="module")
def open_registry() -> Iterator[RegistryServer]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with RegistryServer() as server:
        yield server


@pytest.fixture(params=["basic", "token"])
def auth_registry(request: pytest.FixtureRequest) -> RegistryServer:
    server: RegistryServer = request.getfixturevalue(f"{request.param}_registry")
    return server


def client(registries: dict[str, Registry], secrets: dict[str, dict[str, Any]], **kw: Any) -> RegistryClient:
    """A registry client whose access comes from the configuration and its secrets, as in Lambda."""
    config = TagpinConfig(registries=registries)
    store = CredentialStore(lambda: config, lambda name: secrets[name])
    kw.setdefault("retry", RetryPolicy(attempts=3, base=0.01, cap=0.05))
    return RegistryClient(access=store.access, **kw)


def configured(host: str, kind: Kind | None = None) -> Registry:
    return Registry(
        insecure=True, kind=kind.kind if kind else None, credentials_secret=SECRET if kind else None
    )


@pytest.mark.parametrize("name", ["basic", "token"])
def test_anonymous_is_refused(name: str, request: pytest.FixtureRequest) -> None:
    registry: RegistryServer = request.getfixturevalue(f"{name}_registry")
    pushed = push_image(registry.url, "auth/anon", "v1", auth=PUSHER)
    answer = httpx.head(f"{registry.url}/v2/auth/anon/manifests/v1", headers={"Accept": OCI_MANIFEST})
    assert answer.status_code == 401
    scheme = answer.headers["www-authenticate"].split(" ", 1)[0]
    assert scheme == ("Basic" if name == "basic" else "Bearer")
    with client({registry.host: configured(registry.host)}, {}) as c, pytest.raises(AuthError):
        c.resolve(ImageRef.parse(f"{registry.host}/auth/anon:v1"))
    assert pushed.startswith("sha256:")


@pytest.mark.parametrize("kind", BASIC_KINDS)
def test_htpasswd_credentials_resolve(basic_registry: RegistryServer, kind: str) -> None:
    pushed = push_image(basic_registry.url, "auth/basic", kind, auth=PUSHER)
    with client(
        {basic_registry.host: configured(basic_registry.host, KINDS[kind])}, {SECRET: KINDS[kind].secret}
    ) as c:
        resolution = c.resolve(ImageRef.parse(f"{basic_registry.host}/auth/basic:{kind}"))
    assert (resolution.digest, resolution.method) == (pushed, "HEAD")


@pytest.mark.parametrize("kind", list(KINDS))
def test_token_credentials_resolve(
    token_registry: RegistryServer, token_server: TokenServer, kind: str
) -> None:
    pushed = push_image(token_registry.url, "auth/token", kind, auth=PUSHER)
    spec = KINDS[kind]
    before = token_server.fetches(spec.user)
    with client({token_registry.host: configured(token_registry.host, spec)}, {SECRET: spec.secret}) as c:
        resolution = c.resolve(ImageRef.parse(f"{token_registry.host}/auth/token:{kind}"))
    assert resolution.digest == pushed
    assert token_server.fetches(spec.user) == before + 1  # the token was issued to this kind's user
    last = token_server.requests[-1]
    assert (last.user, last.scopes) == (spec.user, ("repository:auth/token:pull",))


def test_wrong_credentials_fail_only_their_registry(
    auth_registry: RegistryServer, open_registry: RegistryServer, state: State
) -> None:
    names = ["one", "two"]
    for n in names:
        push_image(auth_registry.url, f"auth/{n}", "stable", auth=PUSHER)
        push_image(open_registry.url, f"auth/{n}", "stable")
    followed = [
        FollowedImage(image=f"{host}/auth/{n}:stable", targets=[Target(cluster="c", name=n, container="app")])
        for host in (auth_registry.host, open_registry.host)
        for n in names
    ]
    wrong = {SECRET: {"username": "alice", "password": "not-the-password"}}
    registries = {
        auth_registry.host: configured(auth_registry.host, KINDS["generic"]),
        open_registry.host: configured(open_registry.host),
    }
    queue = ListQueue()
    with client(registries, wrong) as c:
        summary = Poller(Detector(c, state, queue), c, state, lambda h: registries[h]).run(followed)
    assert (summary.resolved, summary.errors, summary.changed, summary.enqueued) == (4, 2, 2, 2)
    assert {ch.move.image for ch in queue.sent} == {f"{open_registry.host}/auth/{n}:stable" for n in names}
    for n in names:
        stored = state.tags.get(f"{auth_registry.host}/auth/{n}:stable")
        assert stored is not None and not stored.digest  # never resolved: nothing to roll to
        assert stored.last_error is not None and stored.last_error.startswith("AuthError")
        assert "not-the-password" not in stored.last_error
        fine = state.tags.get(f"{open_registry.host}/auth/{n}:stable")
        assert fine is not None and fine.digest and not fine.last_error


def resolving_client(registry: RegistryServer, **kw: Any) -> RegistryClient:
    spec = KINDS["generic"]
    return client({registry.host: configured(registry.host, spec)}, {SECRET: spec.secret}, **kw)


def test_token_is_cached_and_shared(token_registry: RegistryServer, token_server: TokenServer) -> None:
    tags = [f"t{i}" for i in range(12)]
    for tag in tags:
        push_image(token_registry.url, "auth/cached", tag, content=b"cached", auth=PUSHER)
    push_image(token_registry.url, "auth/other", "v1", auth=PUSHER)
    fetches: Callable[[], int] = lambda: token_server.fetches("alice")  # noqa: E731
    before = fetches()
    with resolving_client(token_registry) as c:
        refs = [ImageRef.parse(f"{token_registry.host}/auth/cached:{t}") for t in tags]
        first = c.resolve(refs[0])
        assert fetches() == before + 1
        answers = c.resolve_many(refs)  # concurrent, one scope: the cached token serves them all
        assert {a.digest for a in answers.values() if not isinstance(a, Exception)} == {first.digest}
        assert len(answers) == len(tags) and fetches() == before + 1
        c.resolve(ImageRef.parse(f"{token_registry.host}/auth/other:v1"))  # another scope, another token
        assert fetches() == before + 2
    with resolving_client(token_registry) as c:  # a fresh client with no cache fetches concurrently once
        answers = c.resolve_many([ImageRef.parse(f"{token_registry.host}/auth/cached:{t}") for t in tags])
        assert all(not isinstance(a, Exception) for a in answers.values())
    assert fetches() == before + 3


def test_expired_token_is_fetched_again(token_registry: RegistryServer, token_server: TokenServer) -> None:
    push_image(token_registry.url, "auth/expiry", "v1", auth=PUSHER)
    ref = ImageRef.parse(f"{token_registry.host}/auth/expiry:v1")
    clock = FakeClock(1000.0)
    before = token_server.fetches("alice")
    with resolving_client(token_registry, clock=clock) as c:
        c.resolve(ref)
        clock.advance(token_server.expires_in / 2)
        c.resolve(ref)
        assert token_server.fetches("alice") == before + 1  # still valid: cached
        clock.advance(token_server.expires_in / 2)  # past expires_in (less the client's margin)
        c.resolve(ref)
        assert token_server.fetches("alice") == before + 2


def test_token_the_registry_refuses_is_replaced(tmp_path: Path) -> None:
    """After the token server rotates its key (and the registry restarts with the new bundle), the
    client's cached token is refused; it fetches a new one and resolves."""
    require_binary("docker-registry", "/usr/bin/docker-registry")
    with TokenServer(TOKEN_USERS) as tokens, RegistryServer(auth=tokens.registry_auth()) as registry:
        pushed = push_image(registry.url, "auth/rotate", "v1", auth=PUSHER)
        ref = ImageRef.parse(f"{registry.host}/auth/rotate:v1")
        with resolving_client(registry) as c:
            assert c.resolve(ref).digest == pushed
            assert tokens.fetches("alice") == 1
            tokens.rotate_key()
            registry.reconfigure(None)  # same storage, port and auth; reads the new bundle
            assert c.resolve(ref).digest == pushed
            assert tokens.fetches("alice") == 2
