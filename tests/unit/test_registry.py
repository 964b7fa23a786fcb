"""RegistryClient against an in-memory transport: no network."""

import asyncio
import base64
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from tagpin.adapters.registry.auth import parse_challenges
from tagpin.adapters.registry.client import ACCEPT, RegistryClient
from tagpin.adapters.registry.http import Headers, HttpRequest, HttpResponse, TransportError
from tagpin.adapters.registry.resilience import CircuitBreaker, RetryPolicy, parse_retry_after
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import (
    OCI_INDEX,
    AuthError,
    Credentials,
    ManifestNotFound,
    RegistryAccess,
    RegistryError,
    RegistryUnavailable,
)

BODY = b'{"schemaVersion": 2,\n  "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}\n'
BODY_DIGEST = "sha256:" + hashlib.sha256(BODY).hexdigest()
HEADER_DIGEST = "sha256:" + "a" * 64
REALM = "https://auth.example.com/token"
SECRET = "s3cr3t-pa55"
TOKEN = "tok-XYZ-0123456789"


@dataclass
class Seen:
    """A request as the fake saw it (lower-case header names, parsed URL)."""

    method: str
    url: str
    headers: dict[str, str]
    params: dict[str, str]

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc


def response(status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> HttpResponse:
    return HttpResponse(status, Headers((headers or {}).items()), body)


class MockTransport:
    """The client's transport, answering from a function (which may raise TransportError)."""

    def __init__(self, handler: Callable[[Seen], HttpResponse]) -> None:
        self.handler = handler
        self.closed = False

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        seen = Seen(
            request.method,
            request.url,
            {k.lower(): v for k, v in request.headers.items()},
            dict(request.params),
        )
        return self.handler(seen)

    async def close(self) -> None:
        self.closed = True


async def no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


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
        self.requests: list[Seen] = []
        self.tokens_issued = 0
        self.extra_headers: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def token_requests(self) -> list[Seen]:
        return [r for r in self.requests if r.host == "auth.example.com"]

    @property
    def registry_requests(self) -> list[Seen]:
        return [r for r in self.requests if r.host != "auth.example.com"]

    def __call__(self, request: Seen) -> HttpResponse:
        with self._lock:
            self.requests.append(request)
        if request.host == "auth.example.com":
            with self._lock:
                self.tokens_issued += 1
                issued = self.tokens_issued
            doc: dict[str, object] = {self.token_field: f"{TOKEN}-{issued}"}
            if self.expires_in is not None:
                doc["expires_in"] = self.expires_in
            return response(200, {"Content-Type": "application/json"}, json.dumps(doc).encode())
        given = request.headers.get("authorization", "")
        if self.auth == "bearer" and not (given.startswith("Bearer ") and self.accept_tokens(given[7:])):
            challenge = (
                f'Bearer realm="{REALM}",service="registry.example.com",scope="repository:demo/web:pull,push"'
            )
            return response(401, {"WWW-Authenticate": challenge})
        if self.auth == "basic" and given != "Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode():
            return response(401, {"WWW-Authenticate": 'Basic realm="registry"'})
        if self.status != 200:
            return response(self.status, self.extra_headers, b'{"errors": [{"code": "MANIFEST_UNKNOWN"}]}')
        headers = {"Content-Type": self.content_type, "ratelimit-limit": "100;w=21600", **self.extra_headers}
        if request.method == "HEAD":
            if self.head_digest:
                headers["Docker-Content-Digest"] = HEADER_DIGEST
            headers["Content-Length"] = str(len(self.body))
            return response(200, headers)
        if self.get_header:
            headers["Docker-Content-Digest"] = self.get_header
        return response(200, headers, self.body)


def client_for(
    fake: Callable[[Seen], HttpResponse],
    creds: Credentials | None = None,
    clock: Callable[[], float] = time.monotonic,
    access: RegistryAccess | None = None,
    **kw: object,
) -> RegistryClient:
    given = access or RegistryAccess(credentials=creds)
    kw.setdefault("sleep", no_sleep)
    return RegistryClient(access=lambda _r: given, transport=MockTransport(fake), clock=clock, **kw)  # type: ignore[arg-type]


REF = ImageRef.parse("registry.example.com/demo/web:latest")


def test_head_with_digest_header() -> None:
    fake = FakeRegistry()
    res = client_for(fake).resolve(REF)
    assert (res.digest, res.method, res.media_type) == (HEADER_DIGEST, "HEAD", OCI_INDEX)
    assert res.rate_limit == {"ratelimit-limit": "100;w=21600"}
    assert str(res.pinned) == f"registry.example.com/demo/web:latest@{HEADER_DIGEST}"
    (req,) = fake.requests
    assert req.method == "HEAD"
    assert req.url == "https://registry.example.com/v2/demo/web/manifests/latest"
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
        access=lambda host: RegistryAccess(insecure=host == "127.0.0.1:5000"), transport=MockTransport(fake)
    )
    assert client.resolve(ref).digest == HEADER_DIGEST
    assert fake.requests[0].url == f"http://127.0.0.1:5000/v2/demo/web/manifests/{HEADER_DIGEST}"


def test_docker_hub_host_and_library_prefix() -> None:
    fake = FakeRegistry()
    seen: list[str] = []

    def access(registry: str) -> RegistryAccess:
        seen.append(registry)
        return RegistryAccess()

    RegistryClient(access=access, transport=MockTransport(fake)).resolve(ImageRef.parse("nginx"))
    assert seen == ["docker.io"]
    assert fake.requests[0].url == "https://registry-1.docker.io/v2/library/nginx/manifests/latest"


def test_anonymous_token_flow_and_cache() -> None:
    fake = FakeRegistry(auth="bearer", expires_in=None)
    client = client_for(fake)
    assert client.resolve(REF).digest == HEADER_DIGEST
    (token_req,) = fake.token_requests
    assert "authorization" not in token_req.headers
    assert token_req.params["service"] == "registry.example.com"
    assert token_req.params["scope"] == "repository:demo/web:pull"
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
def test_server_errors_are_retried_then_reported(status: int) -> None:
    fake = FakeRegistry(status=status)
    with pytest.raises(RegistryError) as info:
        client_for(fake).resolve(REF)
    assert info.value.status == status
    assert not isinstance(info.value, ManifestNotFound | AuthError)
    assert len(fake.requests) == 3  # RetryPolicy().attempts


def test_timeout_is_registry_error() -> None:
    calls: list[Seen] = []

    def boom(request: Seen) -> HttpResponse:
        calls.append(request)
        raise TransportError("timed out after 10.0s", timeout=True)

    with pytest.raises(RegistryError, match="timed out") as info:
        client_for(boom).resolve(REF)
    assert info.value.status is None
    assert len(calls) == 3


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
    caplog.set_level(logging.DEBUG, logger="tagpin.adapters.registry.client")
    client_for(FakeRegistry(auth="bearer"), creds).resolve(REF)
    with pytest.raises(AuthError) as info:
        client_for(FakeRegistry(auth="bearer", accept_tokens=lambda _t: False), creds).resolve(REF)
    text = caplog.text + str(info.value) + repr(info.value)
    assert "tagpin.adapters.registry.client" in caplog.text
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


def test_close_closes_the_transport_and_the_loop() -> None:
    transport = MockTransport(FakeRegistry())
    with RegistryClient(transport=transport) as client:
        client.resolve(REF)
        thread = client._run_loop().thread
    assert transport.closed
    assert not thread.is_alive()
    RegistryClient().close()  # never used: nothing to close


# --- at scale: retries, Retry-After, circuit breaker, bounds, many at once -----------------------


class Script:
    """Answers from a list (then the last one forever), per request."""

    def __init__(self, *answers: HttpResponse | TransportError) -> None:
        self.answers = list(answers)
        self.requests: list[Seen] = []

    def __call__(self, request: Seen) -> HttpResponse:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, TransportError):
            raise answer
        return answer


OK = response(200, {"Docker-Content-Digest": HEADER_DIGEST, "Content-Type": OCI_INDEX})


def recording_sleep(waits: list[float]) -> Callable[[float], object]:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return sleep


def test_transient_failures_retry_with_jittered_backoff() -> None:
    script = Script(TransportError("ServerDisconnectedError"), response(503), OK)
    waits: list[float] = []
    client = client_for(script, sleep=recording_sleep(waits), rng=lambda lo, hi: hi)
    assert client.resolve(REF).digest == HEADER_DIGEST
    assert len(script.requests) == 3
    assert waits == [0.2, 0.4]  # full jitter, here at its upper bound: base * 2**n
    policy = RetryPolicy(base=1.0, cap=3.0)
    assert all(0 <= policy.backoff(n) <= min(3.0, 2**n) for n in range(8))


def test_429_honours_retry_after() -> None:
    script = Script(response(429, {"Retry-After": "7"}), OK)
    waits: list[float] = []
    client = client_for(script, sleep=recording_sleep(waits), rng=lambda lo, hi: lo)
    assert client.resolve(REF).digest == HEADER_DIGEST
    assert waits == [7.0]


def test_long_retry_after_opens_the_circuit_for_that_long() -> None:
    now = [100.0]
    script = Script(response(429, {"Retry-After": "600", "ratelimit-remaining": "0;w=21600"}))
    client = client_for(script, clock=lambda: now[0])
    with pytest.raises(RegistryError) as info:
        client.resolve(REF)
    assert (info.value.status, info.value.retry_after) == (429, 600.0)
    assert len(script.requests) == 1  # not worth waiting 10 minutes inside a poll
    assert client.rate_limits["registry.example.com"] == {"ratelimit-remaining": "0;w=21600"}
    with pytest.raises(RegistryUnavailable, match="skipped"):
        client.resolve(REF)
    assert len(script.requests) == 1
    now[0] += 601
    script.answers = [OK]
    assert client.resolve(REF).digest == HEADER_DIGEST


def test_circuit_opens_after_consecutive_failures_and_spares_other_registries() -> None:
    now = [0.0]

    def handler(request: Seen) -> HttpResponse:
        return response(503) if request.host == "down.example.com" else OK

    transport = MockTransport(handler)
    client = RegistryClient(
        access=lambda host: RegistryAccess(max_concurrency=2),
        transport=transport,
        breaker_threshold=2,
        breaker_cooldown=30,
        clock=lambda: now[0],
        sleep=no_sleep,
    )
    down = [ImageRef.parse(f"down.example.com/team/app{i}:v1") for i in range(6)]
    up = [ImageRef.parse(f"up.example.com/team/app{i}:v1") for i in range(6)]
    calls: list[Seen] = []
    transport.handler = lambda r: (calls.append(r), handler(r))[1]
    result = client.resolve_many(down + up)
    assert all(isinstance(result[r], RegistryError) for r in down)
    assert sum(isinstance(result[r], RegistryUnavailable) for r in down) >= 1
    assert all(result[r].digest == HEADER_DIGEST for r in up)  # type: ignore[union-attr]
    # two at a time: the first two fail, the circuit opens, the other four are skipped at once.
    assert sum(isinstance(result[r], RegistryUnavailable) for r in down) == 4
    before = len([c for c in calls if c.host == "down.example.com"])
    again = client.resolve_many(down)
    assert all(isinstance(e, RegistryUnavailable) for e in again.values())
    assert len([c for c in calls if c.host == "down.example.com"]) == before
    now[0] += 31  # half-open: requests go through again
    transport.handler = lambda r: OK
    assert client.resolve(down[0]).digest == HEADER_DIGEST
    assert client.breaker("down.example.com").failures == 0


def test_breaker_unit() -> None:
    now = [0.0]
    breaker = CircuitBreaker(threshold=3, cooldown=10, clock=lambda: now[0])
    breaker.failure("boom")
    breaker.failure("boom")
    breaker.check("h")
    breaker.failure("boom")
    with pytest.raises(RegistryUnavailable, match="3 times"):
        breaker.check("h")
    now[0] = 10.5
    breaker.check("h")
    breaker.success()
    assert breaker.failures == 0


def test_global_and_per_registry_bounds() -> None:
    in_flight: dict[str, int] = {}
    peak: dict[str, int] = {}
    total = [0, 0]

    class SlowTransport(MockTransport):
        async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
            host = urlsplit(request.url).netloc
            in_flight[host] = in_flight.get(host, 0) + 1
            total[0] += 1
            peak[host] = max(peak.get(host, 0), in_flight[host])
            total[1] = max(total[1], total[0])
            await asyncio.sleep(0.01)
            in_flight[host] -= 1
            total[0] -= 1
            return OK

    def access(host: str) -> RegistryAccess:
        return RegistryAccess(max_concurrency=2 if host == "small.example.com" else None)

    client = RegistryClient(
        access=access, transport=SlowTransport(FakeRegistry()), max_concurrency=5, per_registry=4
    )
    refs = [
        ImageRef.parse(f"{h}/team/app{i}:v1")
        for h in ("small.example.com", "a.example.com", "b.example.com")
        for i in range(12)
    ]
    result = client.resolve_many(refs)
    assert len(result) == 36 and all(not isinstance(v, Exception) for v in result.values())
    assert peak["small.example.com"] == 2
    assert peak["a.example.com"] <= 4 and peak["b.example.com"] <= 4
    assert total[1] == 5


def test_resolve_many_stops_at_the_deadline() -> None:
    now = [0.0]

    class Hanging(MockTransport):
        async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
            if request.url.endswith("slow"):
                await asyncio.sleep(30)
            return OK

    client = RegistryClient(transport=Hanging(FakeRegistry()), clock=lambda: now[0])
    fast = ImageRef.parse("r.example.com/a:fast")
    slow = ImageRef.parse("r.example.com/a:slow")
    started = time.monotonic()
    result = client.resolve_many([fast, slow], deadline=0.3)
    assert time.monotonic() - started < 10
    assert list(result) == [fast]  # the unfinished one is left out, for the next run


def test_each_distinct_ref_once_and_bad_credentials_only_fail_their_registry() -> None:
    fake = FakeRegistry()

    def access(host: str) -> RegistryAccess:
        if host == "broken.example.com":
            raise KeyError("password")
        return RegistryAccess()

    client = RegistryClient(access=access, transport=MockTransport(fake))
    ok = ImageRef.parse("registry.example.com/demo/web:latest")
    bad = ImageRef.parse("broken.example.com/demo/web:latest")
    result = client.resolve_many([ok, ok, bad, ok])
    assert len(fake.requests) == 1
    assert result[ok].digest == HEADER_DIGEST  # type: ignore[union-attr]
    assert isinstance(result[bad], RegistryError) and "credentials unavailable" in str(result[bad])


def test_concurrent_requests_share_one_token_fetch() -> None:
    fake = FakeRegistry(auth="bearer")
    client = client_for(fake)
    client.resolve(REF)  # learn the challenge
    fake.expires_in = 300
    client._auth.tokens.clear()
    result = client.resolve_many([ImageRef.parse(f"registry.example.com/demo/web:t{i}") for i in range(20)])
    assert len(result) == 20
    assert len(fake.token_requests) == 2  # one for the first resolve, one shared by all twenty


def test_head_only_never_gets_and_reports_rate_limits() -> None:
    fake = FakeRegistry(head_digest=False)
    fake.extra_headers = {"ratelimit-remaining": "97;w=21600", "docker-ratelimit-source": "1.2.3.4"}
    client = client_for(fake, access=RegistryAccess(head_only=True))
    with pytest.raises(RegistryError, match="HEAD-only"):
        client.resolve(REF)
    assert [r.method for r in fake.requests] == ["HEAD"]
    assert client.rate_limits["registry.example.com"]["ratelimit-remaining"] == "97;w=21600"
    with pytest.raises(RegistryError, match="disabled"):
        client.fetch_manifest(REF)
    assert [r.method for r in fake.requests] == ["HEAD"]


def test_fetch_manifest_by_digest_is_verified() -> None:
    fake = FakeRegistry(head_digest=False)
    client = client_for(fake)
    media_type, body = client.fetch_manifest(ImageRef.parse(f"registry.example.com/demo/web@{BODY_DIGEST}"))
    assert (media_type, body) == (OCI_INDEX, BODY)
    with pytest.raises(RegistryError, match="does not match"):
        client.fetch_manifest(ImageRef.parse(f"registry.example.com/demo/web@{HEADER_DIGEST}"))


def test_parse_retry_after() -> None:
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
