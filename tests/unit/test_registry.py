"""RegistryClient against httpx.MockTransport: no network."""

import base64
import hashlib
import json
import logging
import time
from collections.abc import Callable

import httpx
import pytest
from tagpin.refs import ImageRef
from tagpin.registry import (
    ACCEPT,
    OCI_INDEX,
    AuthError,
    Credentials,
    ManifestNotFound,
    RegistryAccess,
    RegistryClient,
    RegistryError,
    parse_challenges,
)

BODY = b'{"schemaVersion": 2,\n  "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}\n'
BODY_DIGEST = "sha256:" + hashlib.sha256(BODY).hexdigest()
HEADER_DIGEST = "sha256:" + "a" * 64
REALM = "https://auth.example.com/token"
SECRET = "s3cr3t-pa55"
TOKEN = "tok-XYZ-0123456789"


class FakeRegistry:
    """A scriptable registry + token server; records every request."""

    def __init__(
        self,
        *,
        auth: str | None = None,  # None | "bearer" | "basic"
        head_digest: bool = True,
        status: int = 200,
        content_type: str = OCI_INDEX,
        get_header: str | None = None,
        body: bytes = BODY,
        token_field: str = "token",
        expires_in: int | None = 300,
        accept_tokens: Callable[[str], bool] | None = None,
    ) -> None:
        self.auth, self.head_digest, self.status = auth, head_digest, status
        self.content_type, self.get_header, self.body = content_type, get_header, body
        self.token_field, self.expires_in = token_field, expires_in
        self.accept_tokens = accept_tokens or (lambda t: t.startswith(TOKEN))
        self.requests: list[httpx.Request] = []
        self.tokens_issued = 0

    @property
    def token_requests(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.host == "auth.example.com"]

    @property
    def registry_requests(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.host != "auth.example.com"]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.host == "auth.example.com":
            self.tokens_issued += 1
            doc: dict[str, object] = {self.token_field: f"{TOKEN}-{self.tokens_issued}"}
            if self.expires_in is not None:
                doc["expires_in"] = self.expires_in
            return httpx.Response(200, json=doc)
        given = request.headers.get("authorization", "")
        if self.auth == "bearer" and not (given.startswith("Bearer ") and self.accept_tokens(given[7:])):
            challenge = (
                f'Bearer realm="{REALM}",service="registry.example.com",scope="repository:demo/web:pull,push"'
            )
            return httpx.Response(401, headers={"WWW-Authenticate": challenge})
        if self.auth == "basic" and given != "Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode():
            return httpx.Response(401, headers={"WWW-Authenticate": 'Basic realm="registry"'})
        if self.status != 200:
            return httpx.Response(self.status, json={"errors": [{"code": "MANIFEST_UNKNOWN"}]})
        headers = {"Content-Type": self.content_type, "ratelimit-limit": "100;w=21600"}
        if request.method == "HEAD":
            if self.head_digest:
                headers["Docker-Content-Digest"] = HEADER_DIGEST
            headers["Content-Length"] = str(len(self.body))
            return httpx.Response(200, headers=headers)
        if self.get_header:
            headers["Docker-Content-Digest"] = self.get_header
        return httpx.Response(200, headers=headers, content=self.body)


def client_for(
    fake: FakeRegistry, creds: Credentials | None = None, clock: Callable[[], float] = time.monotonic
) -> RegistryClient:
    access = RegistryAccess(credentials=creds)
    http = httpx.Client(transport=httpx.MockTransport(fake))
    return RegistryClient(access=lambda _r: access, http=http, clock=clock)


REF = ImageRef.parse("registry.example.com/demo/web:latest")


def test_head_with_digest_header() -> None:
    fake = FakeRegistry()
    res = client_for(fake).resolve(REF)
    assert (res.digest, res.method, res.media_type) == (HEADER_DIGEST, "HEAD", OCI_INDEX)
    assert res.rate_limit == {"ratelimit-limit": "100;w=21600"}
    assert str(res.pinned) == f"registry.example.com/demo/web:latest@{HEADER_DIGEST}"
    (req,) = fake.requests
    assert req.method == "HEAD"
    assert str(req.url) == "https://registry.example.com/v2/demo/web/manifests/latest"
    assert req.headers["accept"] == ACCEPT
    assert ACCEPT.split(", ") == [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]


def test_missing_header_falls_back_to_get_and_hashes_exact_bytes() -> None:
    fake = FakeRegistry(head_digest=False, content_type=f"{OCI_INDEX}; charset=utf-8")
    res = client_for(fake).resolve(REF)
    assert (res.digest, res.method, res.media_type) == (BODY_DIGEST, "GET", OCI_INDEX)
    assert [r.method for r in fake.requests] == ["HEAD", "GET"]
    assert fake.requests[1].headers["accept"] == ACCEPT


def test_get_header_digest_is_verified() -> None:
    ok = client_for(FakeRegistry(head_digest=False, get_header=BODY_DIGEST)).resolve(REF)
    assert ok.digest == BODY_DIGEST
    with pytest.raises(RegistryError, match="does not match"):
        client_for(FakeRegistry(head_digest=False, get_header=HEADER_DIGEST)).resolve(REF)


def test_digest_only_ref_and_insecure_scheme() -> None:
    fake = FakeRegistry()
    ref = ImageRef.parse(f"127.0.0.1:5000/demo/web@{HEADER_DIGEST}")
    client = RegistryClient(
        access=lambda host: RegistryAccess(insecure=host == "127.0.0.1:5000"),
        http=httpx.Client(transport=httpx.MockTransport(fake)),
    )
    assert client.resolve(ref).digest == HEADER_DIGEST
    assert str(fake.requests[0].url) == f"http://127.0.0.1:5000/v2/demo/web/manifests/{HEADER_DIGEST}"


def test_docker_hub_host_and_library_prefix() -> None:
    fake = FakeRegistry()
    seen: list[str] = []

    def access(registry: str) -> RegistryAccess:
        seen.append(registry)
        return RegistryAccess()

    RegistryClient(access=access, http=httpx.Client(transport=httpx.MockTransport(fake))).resolve(
        ImageRef.parse("nginx")
    )
    assert seen == ["docker.io"]
    assert str(fake.requests[0].url) == "https://registry-1.docker.io/v2/library/nginx/manifests/latest"


def test_anonymous_token_flow_and_cache() -> None:
    fake = FakeRegistry(auth="bearer", expires_in=None)
    client = client_for(fake)
    assert client.resolve(REF).digest == HEADER_DIGEST
    (token_req,) = fake.token_requests
    assert "authorization" not in token_req.headers
    assert token_req.url.params["service"] == "registry.example.com"
    assert token_req.url.params["scope"] == "repository:demo/web:pull"
    assert fake.registry_requests[-1].headers["authorization"] == f"Bearer {TOKEN}-1"
    # Second resolve: the cached token is sent up front, no token request, no 401 round trip.
    client.resolve(REF)
    assert len(fake.token_requests) == 1
    assert len(fake.registry_requests) == 3


def test_basic_credentials_reach_the_realm_and_access_token_field() -> None:
    fake = FakeRegistry(auth="bearer", token_field="access_token")
    client = client_for(fake, Credentials("bob", SECRET))
    client.resolve(REF)
    client.resolve(REF)
    (token_req,) = fake.token_requests
    assert (
        token_req.headers["authorization"] == "Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode()
    )
    assert fake.registry_requests[-1].headers["authorization"] == f"Bearer {TOKEN}-1"


def test_expired_token_is_refetched() -> None:
    now = [1000.0]
    fake = FakeRegistry(auth="bearer", expires_in=None)  # default 60 s
    client = client_for(fake, clock=lambda: now[0])
    client.resolve(REF)
    now[0] += 30
    client.resolve(REF)
    assert len(fake.token_requests) == 1
    now[0] += 31  # past 60 s minus the margin
    client.resolve(REF)
    assert len(fake.token_requests) == 2
    assert fake.registry_requests[-1].headers["authorization"] == f"Bearer {TOKEN}-2"


def test_rejected_cached_token_is_refetched_once() -> None:
    fake = FakeRegistry(auth="bearer")
    client = client_for(fake)
    client.resolve(REF)
    fake.accept_tokens = lambda t: t == f"{TOKEN}-2"  # the registry revoked token 1
    assert client.resolve(REF).digest == HEADER_DIGEST
    assert len(fake.token_requests) == 2


def test_401_after_fresh_token_is_auth_error() -> None:
    fake = FakeRegistry(auth="bearer", accept_tokens=lambda _t: False)
    with pytest.raises(AuthError) as info:
        client_for(fake, Credentials("bob", SECRET)).resolve(REF)
    assert info.value.status == 401
    assert info.value.host == "registry.example.com"
    assert len(fake.token_requests) == 1
    assert SECRET not in str(info.value) and TOKEN not in str(info.value)


def test_basic_challenge() -> None:
    fake = FakeRegistry(auth="basic")
    client = client_for(fake, Credentials("bob", SECRET))
    assert client.resolve(REF).digest == HEADER_DIGEST
    client.resolve(REF)
    assert not fake.token_requests
    assert len(fake.registry_requests) == 3  # 401, ok, then Basic sent up front
    with pytest.raises(AuthError, match="none are configured"):
        client_for(FakeRegistry(auth="basic")).resolve(REF)


def test_not_found() -> None:
    with pytest.raises(ManifestNotFound) as info:
        client_for(FakeRegistry(status=404)).resolve(REF)
    assert info.value.status == 404


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_server_errors(status: int) -> None:
    with pytest.raises(RegistryError) as info:
        client_for(FakeRegistry(status=status)).resolve(REF)
    assert info.value.status == status
    assert not isinstance(info.value, ManifestNotFound | AuthError)


def test_timeout_is_registry_error() -> None:
    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    client = RegistryClient(http=httpx.Client(transport=httpx.MockTransport(boom)))
    with pytest.raises(RegistryError, match="timed out") as info:
        client.resolve(REF)
    assert info.value.status is None


def test_schema1_rejected() -> None:
    prettyjws = "application/vnd.docker.distribution.manifest.v1+prettyjws"
    with pytest.raises(RegistryError, match="schema1"):
        client_for(FakeRegistry(content_type=prettyjws)).resolve(REF)
    body = json.dumps({"schemaVersion": 1, "name": "demo/web", "tag": "latest"}).encode()
    with pytest.raises(RegistryError, match="schema1"):
        client_for(FakeRegistry(head_digest=False, content_type="application/json", body=body)).resolve(REF)


def test_secrets_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    creds = Credentials("bob", SECRET)
    assert SECRET not in repr(creds) and SECRET not in str(creds)
    assert SECRET not in repr(RegistryAccess(credentials=creds))
    caplog.set_level(logging.DEBUG)
    client_for(FakeRegistry(auth="bearer"), creds).resolve(REF)
    with pytest.raises(AuthError) as info:
        client_for(FakeRegistry(auth="bearer", accept_tokens=lambda _t: False), creds).resolve(REF)
    text = caplog.text + str(info.value) + repr(info.value)
    assert "tagpin.registry" in caplog.text
    assert SECRET not in text and TOKEN not in text
    assert base64.b64encode(f"bob:{SECRET}".encode()).decode() not in text


def test_parse_challenges() -> None:
    (bearer,) = parse_challenges(
        [
            'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
            'scope="repository:library/nginx:pull,push",error="insufficient_scope"'
        ]
    )
    assert bearer.scheme == "bearer"
    assert bearer.params == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:library/nginx:pull,push",
        "error": "insufficient_scope",
    }
    both = parse_challenges(['Basic realm="Quay", Bearer realm="https://quay.io/v2/auth",service=quay.io'])
    assert [c.scheme for c in both] == ["basic", "bearer"]
    assert both[1].params == {"realm": "https://quay.io/v2/auth", "service": "quay.io"}
    (esc,) = parse_challenges(['Bearer realm="a\\"b"'])
    assert esc.params["realm"] == 'a"b'
    assert parse_challenges(["Negotiate abc==", 'basic realm="x"'])[-1].scheme == "basic"


def test_close_only_closes_own_client() -> None:
    http = httpx.Client(transport=httpx.MockTransport(FakeRegistry()))
    with RegistryClient(http=http) as client:
        client.resolve(REF)
    assert not http.is_closed
    own = RegistryClient()
    own.close()
