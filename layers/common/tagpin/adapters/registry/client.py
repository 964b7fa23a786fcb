"""Resolve a tag to the digest it points to now (Registry HTTP API v2 / OCI distribution).

``HEAD /v2/<name>/manifests/<tag>`` with index-capable Accept types, ``Docker-Content-Digest`` verbatim,
GET + sha256 of the exact bytes when the header is missing (never for registries marked HEAD-only,
e.g. Docker Hub, where a manifest GET counts as a pull), and the bearer-token flow with a token
cache. For multi-arch images the digest is the index digest.

At scale (the poller resolves thousands of tags per run):

- one asyncio event loop in a daemon thread owns all I/O; the synchronous API (``resolve``,
  ``resolve_many``, ``start_many``) submits coroutines to it, so any thread may call it and every
  call shares one connection pool (kept alive across warm Lambda invocations);
- the HTTP stack is aiohttp. Measured on the local registry (2 cores, 32 concurrent HEADs, CPU
  time per request in the client): ``httpx.AsyncClient`` 1.3 ms, httpx sync in threads 0.66 ms,
  urllib3 in threads 0.30 ms, httpx over an aiohttp transport 0.33 ms, aiohttp 0.13 ms. httpx's
  async pool (httpcore 1.0.9) re-checks every pooled connection (``has_expired`` ->
  ``is_readable``, a socket poll) each time it assigns a request, and takes an anyio lock that
  yields to the loop on every acquire: 2,000 HEADs cost 160,894 ``has_expired`` calls;
- a global bound and a per-registry bound on requests in flight (per-registry acquired first,
  so a slow registry cannot hold global slots while it waits for its own);
- retries with full-jitter exponential backoff on 5xx, timeouts and connection errors; 429
  honours ``Retry-After`` (a wait longer than the policy allows opens the circuit instead);
- a circuit breaker per registry: after ``threshold`` consecutive failed resolutions the
  registry is skipped (``RegistryUnavailable``) until ``cooldown`` has passed.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import hashlib
import json
import logging
import random
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any, Protocol, Self

from tagpin.domain.refs import ImageRef, is_digest
from tagpin.ports.registry import (
    MANIFEST_TYPES,
    RETRY_STATUSES,
    AuthError,
    ManifestNotFound,
    RegistryAccess,
    RegistryError,
    RegistryUnavailable,
    Resolution,
)

log = logging.getLogger(__name__)

ACCEPT = ", ".join(MANIFEST_TYPES)
SCHEMA1_TYPES = frozenset(
    {
        "application/vnd.docker.distribution.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v1+prettyjws",
    }
)
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
RATE_LIMIT_HEADERS = ("ratelimit-limit", "ratelimit-remaining", "docker-ratelimit-source")
TOKEN_DEFAULT_TTL = 60.0
TOKEN_MARGIN = 10.0
_HASHES = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lower-case: "bearer", "basic", ...
    params: dict[str, str]


_TCHARS = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_PARAM_RE = re.compile(rf'[\s,]*({_TCHARS})\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)')
_SCHEME_RE = re.compile(rf"[\s,]*({_TCHARS})(?=[\s,]|$)")


def parse_challenges(values: list[str]) -> list[Challenge]:
    """Parse ``WWW-Authenticate`` values (several challenges per value allowed, quoted params)."""
    out: list[Challenge] = []
    for value in values:
        pos, current = 0, None
        while pos < len(value):
            m = _PARAM_RE.match(value, pos) if current is not None else None
            if m and current is not None:
                raw = m[2]
                if raw.startswith('"'):
                    raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
                current.params[m[1].lower()] = raw
                pos = m.end()
                continue
            m = _SCHEME_RE.match(value, pos)
            if m:
                current = Challenge(m[1].lower(), {})
                out.append(current)
                pos = m.end()
                continue
            pos += 1  # token68 or junk: skip
    return out


def api_host(registry: str) -> str:
    """The host that serves the v2 API for a reference's registry (``docker.io`` -> registry-1)."""
    return DOCKER_HUB_API if registry == DOCKER_HUB else registry


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


# --- transport ------------------------------------------------------------------------------------


class Headers:
    """Case-insensitive, multi-valued response headers."""

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items = [(k.lower(), v) for k, v in items]

    def get(self, name: str, default: str = "") -> str:
        name = name.lower()
        return next((v for k, v in self._items if k == name), default)

    def get_list(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self._items if k == name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(k == name.lower() for k, _v in self._items)


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: Mapping[str, str]
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: Headers
    body: bytes = b""

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type").split(";", 1)[0].strip().lower()


class TransportError(Exception):
    """No HTTP answer: connection refused or reset, or a timeout (``timeout`` True)."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class Transport(Protocol):
    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse: ...

    async def close(self) -> None: ...


class AiohttpTransport:
    """The production transport: one aiohttp session (keep-alive pool) created in the loop."""

    def __init__(self, limit: int = 100, keepalive_timeout: float = 30.0) -> None:
        self._limit = limit
        self._keepalive = keepalive_timeout
        self._session: Any = None

    async def send(self, request: HttpRequest, timeout: float) -> HttpResponse:
        import aiohttp

        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limit, keepalive_timeout=self._keepalive, ttl_dns_cache=300
            )
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        try:
            async with self._session.request(
                request.method,
                request.url,
                headers=dict(request.headers),
                params=dict(request.params) or None,
                timeout=aiohttp.ClientTimeout(total=timeout),
                allow_redirects=True,
            ) as response:
                body = b"" if request.method == "HEAD" else await response.read()
                return HttpResponse(response.status, Headers(response.headers.items()), body)
        except TimeoutError:
            raise TransportError(f"timed out after {timeout:.1f}s", timeout=True) from None
        except aiohttp.ClientError as exc:
            raise TransportError(type(exc).__name__) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


# --- retries and the circuit breaker --------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # tries per request, the first included
    base: float = 0.2  # seconds; full jitter: uniform(0, min(cap, base * 2**n))
    cap: float = 5.0
    max_retry_after: float = 30.0  # a longer Retry-After opens the circuit for that long instead

    def backoff(self, attempt: int, rng: Callable[[float, float], float] = random.uniform) -> float:
        return rng(0.0, min(self.cap, self.base * (2**attempt)))


class CircuitBreaker:
    """Per registry: opens after ``threshold`` consecutive failures, for ``cooldown`` seconds,
    then lets requests through again (a failure re-opens it at once)."""

    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float]) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self.failures = 0
        self.open_until = 0.0
        self.last_error = ""

    def check(self, host: str) -> None:
        if self.open_until > self._clock():
            raise RegistryUnavailable(
                f"{host}: skipped, the registry failed {self.failures} times in a row "
                f"(last: {self.last_error}); retrying after {self.open_until - self._clock():.0f}s",
                host=host,
            )

    def success(self) -> None:
        self.failures = 0
        self.open_until = 0.0

    def failure(self, error: str, *, open_for: float | None = None) -> None:
        self.failures += 1
        self.last_error = error
        if open_for is not None or self.failures >= self.threshold:
            self.open_until = self._clock() + max(self.cooldown, open_for or 0.0)


# --- the client -----------------------------------------------------------------------------------


class _Loop:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="tagpin-registry", daemon=True)
        self.thread.start()

    def submit[T](self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        async def run() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(run(), self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.loop.close()


class RegistryClient:
    def __init__(
        self,
        access: Callable[[str], RegistryAccess] | None = None,
        transport: Transport | None = None,
        *,
        timeout: float = 10.0,
        max_concurrency: int = 64,
        per_registry: int = 32,
        retry: RetryPolicy | None = None,
        breaker_threshold: int = 5,
        breaker_cooldown: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self._access = access or (lambda _registry: RegistryAccess())
        self._transport: Transport = transport or AiohttpTransport(limit=max_concurrency)
        self._timeout = timeout
        self._max_concurrency = max_concurrency
        self._per_registry = per_registry
        self._retry = retry or RetryPolicy()
        self._breaker_threshold = breaker_threshold
        self._breaker_cooldown = breaker_cooldown
        self._clock = clock
        self._sleep = sleep
        self._rng = rng
        self._lock = threading.Lock()
        self._loop: _Loop | None = None
        # Everything below is touched only from the loop thread.
        self._global: asyncio.Semaphore | None = None
        self._hosts: dict[str, asyncio.Semaphore] = {}
        self._breakers: dict[str, CircuitBreaker] = {}
        self._challenges: dict[str, Challenge] = {}  # api host -> last auth challenge seen
        self._tokens: dict[tuple[str, str, str, str], tuple[str, float]] = {}  # key -> (token, expires)
        self._token_fetches: dict[tuple[str, str, str, str], asyncio.Future[str]] = {}
        self.rate_limits: dict[str, dict[str, str]] = {}  # api host -> last rate-limit headers seen

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.submit(self._transport.close()).result(timeout=10)
            loop.stop()

    def _run_loop(self) -> _Loop:
        with self._lock:
            if self._loop is None:
                self._loop = _Loop()
            return self._loop

    # --- synchronous API (any thread) --------------------------------------------------------------

    def resolve(self, ref: ImageRef) -> Resolution:
        """Digest the tag (or, for a digest-only ref, the digest) points to, as the registry reports it."""
        access = self._access(ref.registry)
        return self._run_loop().submit(self.aresolve(ref, access)).result()

    def start_many(
        self, refs: Iterable[ImageRef], *, deadline: float | None = None
    ) -> concurrent.futures.Future[dict[ImageRef, Resolution | RegistryError]]:
        """Resolve many refs concurrently, in the background. The future's value maps each ref
        that finished to its resolution or error; refs still unresolved at ``deadline`` (a
        ``clock`` value) are cancelled and left out."""
        refs = list(dict.fromkeys(refs))
        accesses: dict[str, RegistryAccess | RegistryError] = {}
        for registry in {r.registry for r in refs}:
            try:  # in the caller's thread: reading a secret or an ECR token may block
                accesses[registry] = self._access(registry)
            except Exception as exc:  # one registry's bad credentials fail only its own tags
                accesses[registry] = RegistryError(
                    f"{registry}: credentials unavailable ({type(exc).__name__}: {exc})", host=registry
                )
        return self._run_loop().submit(self._resolve_many(refs, accesses, deadline))

    def resolve_many(
        self, refs: Iterable[ImageRef], *, deadline: float | None = None
    ) -> dict[ImageRef, Resolution | RegistryError]:
        return self.start_many(refs, deadline=deadline).result()

    def fetch_manifest(self, ref: ImageRef) -> tuple[str, bytes]:
        """(media type, exact bytes) of a manifest by tag or digest: a GET, so never on HEAD-only
        registries."""
        access = self._access(ref.registry)
        return self._run_loop().submit(self._fetch(ref, access)).result()

    # --- async core (the loop thread) --------------------------------------------------------------

    async def _resolve_many(
        self,
        refs: list[ImageRef],
        accesses: Mapping[str, RegistryAccess | RegistryError],
        deadline: float | None,
    ) -> dict[ImageRef, Resolution | RegistryError]:
        out: dict[ImageRef, Resolution | RegistryError] = {}

        async def one(ref: ImageRef) -> None:
            access = accesses[ref.registry]
            if isinstance(access, RegistryError):
                out[ref] = access
                return
            try:
                out[ref] = await self.aresolve(ref, access)
            except RegistryError as exc:
                out[ref] = exc
            except Exception as exc:  # a bug or an odd answer must not lose the other tags
                out[ref] = RegistryError(f"{ref.registry}: {type(exc).__name__}: {exc}", host=ref.registry)

        tasks = [asyncio.ensure_future(one(r)) for r in refs]
        if not tasks:
            return out
        timeout = None if deadline is None else max(0.0, deadline - self._clock())
        _done, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        return out

    def _bounds(self, host: str, access: RegistryAccess) -> tuple[asyncio.Semaphore, asyncio.Semaphore]:
        if self._global is None:
            self._global = asyncio.Semaphore(self._max_concurrency)
        sem = self._hosts.get(host)
        if sem is None:
            sem = self._hosts[host] = asyncio.Semaphore(access.max_concurrency or self._per_registry)
        return sem, self._global

    def breaker(self, host: str) -> CircuitBreaker:
        found = self._breakers.get(host)
        if found is None:
            found = self._breakers[host] = CircuitBreaker(
                self._breaker_threshold, self._breaker_cooldown, self._clock
            )
        return found

    async def aresolve(self, ref: ImageRef, access: RegistryAccess) -> Resolution:
        host = api_host(ref.registry)
        breaker = self.breaker(host)
        breaker.check(host)
        per_host, overall = self._bounds(host, access)
        async with per_host, overall:
            breaker.check(host)  # it may have opened while this one waited
            try:
                resolution = await self._resolve(ref, access, host)
            except RegistryError as exc:
                if exc.transient and not isinstance(exc, RegistryUnavailable):
                    breaker.failure(str(exc), open_for=exc.retry_after)
                raise
        breaker.success()
        return resolution

    def _url(self, ref: ImageRef, access: RegistryAccess, reference: str) -> str:
        scheme = "http" if access.insecure else "https"
        return f"{scheme}://{api_host(ref.registry)}/v2/{ref.repository}/manifests/{reference}"

    async def _resolve(self, ref: ImageRef, access: RegistryAccess, host: str) -> Resolution:
        reference = ref.tag or ref.digest
        if reference is None:
            raise ValueError(f"{ref} has neither tag nor digest")
        url = self._url(ref, access, reference)
        scope = f"repository:{ref.repository}:pull"

        head = await self._request("HEAD", url, host, scope, access)
        self._check_status(head, host, ref)
        rate_limit = self._rate_limit(head, host)
        media_type = head.media_type
        self._reject_schema1(media_type, host, ref)
        digest = head.headers.get("docker-content-digest")
        if is_digest(digest):
            log.debug("resolved %s via HEAD to %s", ref, digest)
            return Resolution(ref, digest, media_type, "HEAD", rate_limit)
        if access.head_only:
            raise RegistryError(
                f"{host}: HEAD {ref} gave no usable Docker-Content-Digest and this registry is HEAD-only "
                "(a GET would count against its pull limit)",
                host=host,
                status=head.status,
            )
        log.debug("no usable Docker-Content-Digest from HEAD %s; falling back to GET", url)
        get = await self._request("GET", url, host, scope, access)
        self._check_status(get, host, ref)
        body = get.body
        body_type, schema_version = self._body_info(body)
        media_type = get.media_type
        self._reject_schema1(media_type, host, ref)
        if body_type and media_type not in MANIFEST_TYPES:  # e.g. served as application/json
            media_type = body_type
        if schema_version == 1:
            self._reject_schema1(f"schemaVersion 1 ({media_type or 'no media type'})", host, ref, always=True)
        digest = self._verified_digest(get, host, ref)
        log.debug("resolved %s via GET to %s", ref, digest)
        return Resolution(ref, digest, media_type, "GET", self._rate_limit(get, host))

    async def _fetch(self, ref: ImageRef, access: RegistryAccess) -> tuple[str, bytes]:
        host = api_host(ref.registry)
        if access.head_only:
            raise RegistryError(f"{host}: manifest GETs are disabled for this registry", host=host)
        reference = ref.digest or ref.tag or "latest"
        per_host, overall = self._bounds(host, access)
        async with per_host, overall:
            get = await self._request(
                "GET", self._url(ref, access, reference), host, f"repository:{ref.repository}:pull", access
            )
        self._check_status(get, host, ref)
        if ref.digest:
            self._verified_digest(get, host, ref, expected=ref.digest)
        body_type, _version = self._body_info(get.body)
        return (get.media_type if get.media_type in MANIFEST_TYPES else body_type), get.body

    @staticmethod
    def _verified_digest(
        response: HttpResponse, host: str, ref: ImageRef, expected: str | None = None
    ) -> str:
        body = response.body
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        for claimed in (response.headers.get("docker-content-digest"), expected):
            if not claimed:
                continue
            algorithm, _, hexpart = claimed.partition(":")
            hasher = _HASHES.get(algorithm)
            if not is_digest(claimed) or hasher is None or hasher(body).hexdigest() != hexpart:
                raise RegistryError(
                    f"{host}: Docker-Content-Digest {claimed!r} does not match the manifest of {ref}",
                    host=host,
                    status=response.status,
                )
            digest = claimed
        return digest

    @staticmethod
    def _body_info(body: bytes) -> tuple[str, int | None]:
        """(mediaType, schemaVersion) of a manifest body, as far as they can be read."""
        try:
            doc = json.loads(body)
        except ValueError:
            return "", None
        if not isinstance(doc, dict):
            return "", None
        media_type, version = doc.get("mediaType"), doc.get("schemaVersion")
        return (media_type if isinstance(media_type, str) else ""), (
            version if isinstance(version, int) else None
        )

    @staticmethod
    def _reject_schema1(media_type: str, host: str, ref: ImageRef, *, always: bool = False) -> None:
        if always or media_type in SCHEMA1_TYPES:
            raise RegistryError(
                f"{host} served a Docker schema1 manifest ({media_type}) for {ref}; schema1 is not supported",
                host=host,
            )

    def _rate_limit(self, response: HttpResponse, host: str) -> dict[str, str]:
        found = {k: response.headers.get(k) for k in RATE_LIMIT_HEADERS if k in response.headers}
        if found:
            self.rate_limits[host] = found
        return found

    def _check_status(self, response: HttpResponse, host: str, ref: ImageRef) -> None:
        status = response.status
        if 200 <= status < 300:
            return
        if status == 404:
            raise ManifestNotFound(f"{host}: manifest for {ref} not found", host=host, status=status)
        if status in (401, 403):
            raise AuthError(f"{host}: access to {ref} denied (HTTP {status})", host=host, status=status)
        if status == 429:
            self._rate_limit(response, host)
            raise RegistryError(
                f"{host}: rate limited (HTTP 429) resolving {ref}",
                host=host,
                status=status,
                retry_after=parse_retry_after(response.headers.get("retry-after")),
            )
        raise RegistryError(f"{host}: HTTP {status} resolving {ref}", host=host, status=status)

    # --- HTTP, retries and auth --------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        url: str,
        host: str,
        headers: dict[str, str],
        params: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """One request with retries: 5xx, timeouts and resets back off with full jitter; 429 waits
        for Retry-After when the policy allows it."""
        request = HttpRequest(method, url, headers, params or {})
        attempt = 0
        while True:
            wait: float | None
            try:
                response = await self._transport.send(request, self._timeout)
            except TransportError as exc:
                what = "timed out" if exc.timeout else "connection failed"
                error = RegistryError(f"{host}: {what} ({exc}) on {method} {url}", host=host)
                wait = self._retry.backoff(attempt, self._rng)
                if attempt + 1 >= self._retry.attempts:
                    raise error from None
            else:
                log.debug("%s %s -> %s", method, url, response.status)
                if response.status not in RETRY_STATUSES or attempt + 1 >= self._retry.attempts:
                    return response
                wait = self._retry.backoff(attempt, self._rng)
                if response.status == 429:
                    after = parse_retry_after(response.headers.get("retry-after"))
                    if after is not None and after > self._retry.max_retry_after:
                        return response  # not worth waiting here: the breaker opens for that long
                    wait = max(wait, after or 0.0)
            attempt += 1
            await self._sleep(wait)
            self.breaker(host).check(host)  # others may have found the registry down meanwhile

    async def _request(
        self, method: str, url: str, host: str, scope: str, access: RegistryAccess
    ) -> HttpResponse:
        headers = {"Accept": ACCEPT}
        cached = await self._cached_authorization(host, scope, access)
        if cached:
            headers["Authorization"] = cached
        response = await self._send(method, url, host, headers)
        if response.status != 401:
            return response
        challenges = parse_challenges(response.headers.get_list("www-authenticate"))
        challenge = next((c for c in challenges if c.scheme == "bearer"), None) or next(
            (c for c in challenges if c.scheme == "basic"), None
        )
        if challenge is None:
            raise AuthError(
                f"{host}: HTTP 401 without a usable WWW-Authenticate challenge", host=host, status=401
            )
        self._challenges[host] = challenge
        headers["Authorization"] = await self._authorize(
            host, challenge, scope, access, refresh=True, rejected=cached
        )
        response = await self._send(method, url, host, headers)
        if response.status == 401:
            if access.invalidate is not None:
                access.invalidate()  # e.g. an ECR token revoked early: fetch a new one next time
            raise AuthError(f"{host}: credentials or token rejected (HTTP 401)", host=host, status=401)
        return response

    async def _cached_authorization(self, host: str, scope: str, access: RegistryAccess) -> str | None:
        """The Authorization header to send up front, once the host's challenge is known: a cached
        token (or one fetched now, shared by every concurrent request of the same scope)."""
        challenge = self._challenges.get(host)
        if challenge is None:
            return None
        if challenge.scheme == "basic":
            return self._basic(access, host) if access.credentials else None
        return await self._authorize(host, challenge, scope, access, refresh=False)

    @staticmethod
    def _token_key(challenge: Challenge, scope: str, access: RegistryAccess) -> tuple[str, str, str, str]:
        user = access.credentials.username if access.credentials else ""
        return (challenge.params.get("realm", ""), challenge.params.get("service", ""), scope, user)

    @staticmethod
    def _basic(access: RegistryAccess, host: str) -> str:
        if access.credentials is None:
            raise AuthError(f"{host}: registry asks for Basic credentials and none are configured", host=host)
        pair = f"{access.credentials.username}:{access.credentials.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    async def _authorize(
        self,
        host: str,
        challenge: Challenge,
        scope: str,
        access: RegistryAccess,
        *,
        refresh: bool,
        rejected: str | None = None,
    ) -> str:
        """Authorization header: Basic, or a bearer token from the cache or the realm. ``refresh``
        (after a 401) drops the cached token if it is the one the registry ``rejected``; a token
        another request fetched meanwhile (e.g. the first requests of a cold client all get a 401)
        is used as it is. One fetch per key at a time."""
        if challenge.scheme == "basic":
            return self._basic(access, host)
        key = self._token_key(challenge, scope, access)
        if refresh:
            cached = self._tokens.get(key)
            if cached is None or f"Bearer {cached[0]}" == rejected:
                self._tokens.pop(key, None)
        entry = self._tokens.get(key)
        if entry and entry[1] > self._clock():
            return f"Bearer {entry[0]}"
        pending = self._token_fetches.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._fetch_token(host, challenge, scope, access, key))
            self._token_fetches[key] = pending
            pending.add_done_callback(lambda _f: self._token_fetches.pop(key, None))
        return f"Bearer {await asyncio.shield(pending)}"

    async def _fetch_token(
        self,
        host: str,
        challenge: Challenge,
        scope: str,
        access: RegistryAccess,
        key: tuple[str, str, str, str],
    ) -> str:
        realm = challenge.params.get("realm")
        if not realm or not realm.startswith(("https://", "http://")):
            raise AuthError(f"{host}: bearer challenge without a usable realm", host=host, status=401)
        params = {k: v for k, v in (("service", challenge.params.get("service")), ("scope", scope)) if v}
        headers = {"Authorization": self._basic(access, host)} if access.credentials else {}
        response = await self._send("GET", realm, host, headers, params)
        if response.status in (401, 403):
            if access.invalidate is not None:
                access.invalidate()
            raise AuthError(
                f"{host}: token endpoint {realm} refused (HTTP {response.status})",
                host=host,
                status=response.status,
            )
        if response.status != 200:
            raise RegistryError(
                f"{host}: token endpoint {realm} answered HTTP {response.status}",
                host=host,
                status=response.status,
            )
        try:
            doc = json.loads(response.body)
            token = doc.get("token") or doc.get("access_token")
            ttl = float(doc.get("expires_in") or TOKEN_DEFAULT_TTL)
        except (ValueError, AttributeError, TypeError):
            token, ttl = None, 0.0
        if not isinstance(token, str) or not token:
            raise AuthError(f"{host}: token endpoint {realm} returned no token", host=host, status=200)
        self._tokens[key] = (token, self._clock() + ttl - TOKEN_MARGIN)
        log.debug("fetched registry token for %s (%s), valid %.0fs", host, scope, ttl)
        return token
