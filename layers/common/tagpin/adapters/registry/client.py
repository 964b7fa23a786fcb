"""Resolve a tag to the digest it points to now (Registry HTTP API v2 / OCI distribution).

``HEAD /v2/<name>/manifests/<tag>`` with index-capable Accept types, ``Docker-Content-Digest`` verbatim,
GET + sha256 of the exact bytes when the header is missing (never for registries marked HEAD-only,
e.g. Docker Hub, where a manifest GET counts as a pull), and the bearer-token flow with a token
cache (``auth``). For multi-arch images the digest is the index digest.

At scale (the poller resolves thousands of tags per run):

- one asyncio event loop in a daemon thread owns all I/O; the synchronous API (``resolve``,
  ``resolve_many``, ``start_many``) submits coroutines to it, so any thread may call it and every
  call shares one connection pool (kept alive across warm Lambda invocations). The loop thread and
  the transport, and why aiohttp, are in ``http``;
- a global bound and a per-registry bound on requests in flight (``bounds``);
- retries (``_send``) and a circuit breaker per registry (``aresolve``); the policy, the breaker
  and what they do are in ``resilience``;
- each registry's progress in a batch (``batch``): a registry that has answered nothing
  ``registry_deadline`` seconds after it was asked gives its global slots back, and its first
  timeout then cuts it from the batch (no retry, its breaker opens); one that answers is not cut.

``list_tags`` lists a repository's tags page by page (``tags``: pagination, bounds, validation), each
page through the same auth, retries, breaker and bounds as a resolution; ``fetch_blob`` and
``referrers`` (``artifacts``: what signature verification reads) too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Self

from tagpin.adapters.registry.artifacts import ArtifactLimits, ArtifactReads
from tagpin.adapters.registry.auth import RegistryAuth
from tagpin.adapters.registry.batch import Progress, accesses_for, resolve_batch
from tagpin.adapters.registry.bounds import Bounds
from tagpin.adapters.registry.http import (
    AiohttpTransport,
    BodyTooLarge,
    HttpRequest,
    HttpResponse,
    LoopThread,
    RequestMeter,
    Transport,
    TransportError,
)
from tagpin.adapters.registry.manifests import MAX_MANIFEST_BYTES as MAX_MANIFEST
from tagpin.adapters.registry.manifests import (
    body_info,
    check_status,
    manifest_type,
    reject_schema1,
    verified_digest,
)
from tagpin.adapters.registry.resilience import CircuitBreaker, RetryPolicy, parse_retry_after
from tagpin.adapters.registry.tags import ACCEPT_TAG_LIST, TagLimits, check_page, paginate
from tagpin.domain.refs import Digest, ImageRef, InvalidReference
from tagpin.ports.registry import (
    MANIFEST_TYPES,
    RETRY_STATUSES,
    ContentTooLarge,
    Descriptor,
    GetsDisabled,
    RegistryAccess,
    RegistryError,
    RegistryUnavailable,
    Resolution,
    TagListing,
)

log = logging.getLogger(__name__)

ACCEPT = ", ".join(MANIFEST_TYPES)
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
RATE_LIMIT_HEADERS = ("ratelimit-limit", "ratelimit-remaining", "docker-ratelimit-source")


def api_host(registry: str) -> str:
    """The host that serves the v2 API for a reference's registry (``docker.io`` -> registry-1)."""
    return DOCKER_HUB_API if registry == DOCKER_HUB else registry


# --- the client -----------------------------------------------------------------------------------


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
        registry_deadline: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: Callable[[float, float], float] = random.uniform,
        tag_limits: TagLimits | None = None,
        artifact_limits: ArtifactLimits | None = None,
    ) -> None:
        self._access = access or (lambda _registry: RegistryAccess())
        # Requests stepped aside (``bounds``) keep their connections: twice the global bound.
        self._transport: Transport = transport or AiohttpTransport(limit=2 * max_concurrency)
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self._breaker_threshold = breaker_threshold
        self._breaker_cooldown = breaker_cooldown
        # Seconds after which a registry that has answered nothing in a batch is silent (``batch``).
        self._registry_deadline = registry_deadline
        self._clock = clock
        self._sleep = sleep
        self._rng = rng
        self._tag_limits = tag_limits or TagLimits()
        self._lock = threading.Lock()
        self._loop: LoopThread | None = None
        # Everything below is touched only from the loop thread.
        self._bounds = Bounds(max_concurrency, per_registry)
        self._breakers: dict[str, CircuitBreaker] = {}
        self._auth = RegistryAuth(self._send, clock)  # challenges and the token cache
        self._artifacts = ArtifactReads(
            self._auth, self.breaker, self._bounds.hold, self._fetch, artifact_limits or ArtifactLimits()
        )
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

    def _run_loop(self) -> LoopThread:
        with self._lock:
            if self._loop is None:
                self._loop = LoopThread()
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
        batch = resolve_batch(
            refs,
            accesses_for(refs, self._access),
            self.aresolve,
            lambda ref: api_host(ref.registry),
            deadline=deadline,
            registry_deadline=self._registry_deadline,
            clock=self._clock,
        )
        return self._run_loop().submit(batch)

    def resolve_many(
        self, refs: Iterable[ImageRef], *, deadline: float | None = None
    ) -> dict[ImageRef, Resolution | RegistryError]:
        return self.start_many(refs, deadline=deadline).result()

    def fetch_manifest(self, ref: ImageRef, *, max_bytes: int | None = None) -> tuple[str, bytes]:
        """(media type, exact bytes) of a manifest by tag or digest: a GET, so never on HEAD-only
        registries. ``max_bytes``: refused (``ContentTooLarge``) past that many bytes."""
        access = self._access(ref.registry)
        return self._run_loop().submit(self._fetch(ref, access, max_bytes)).result()

    def fetch_blob(self, ref: ImageRef, digest: str, max_bytes: int) -> bytes:
        """The blob ``digest`` of ``ref``'s repository, checked against the digest (``ContentMismatch``),
        at most ``max_bytes`` long (``ContentTooLarge``); see ``artifacts``."""
        access = self._access(ref.registry)
        return self._run_loop().submit(self._artifacts.fetch_blob(ref, digest, max_bytes, access)).result()

    def referrers(self, ref: ImageRef, digest: str, *, artifact_type: str | None = None) -> list[Descriptor]:
        """The manifests whose subject is ``digest`` in ``ref``'s repository (the referrers API, else
        the ``sha256-<hex>`` tag schema), of ``artifact_type`` when given; see ``artifacts``."""
        access = self._access(ref.registry)
        call = self._artifacts.referrers(ref, digest, artifact_type, access)
        return self._run_loop().submit(call).result()

    def list_tags(self, repository: ImageRef, *, limits: TagLimits | None = None) -> TagListing:
        """The tags of ``repository`` (its tag and digest are ignored), within ``limits`` (the
        client's by default); see ``tags``."""
        access = self._access(repository.registry)
        return self._run_loop().submit(self.alist_tags(repository, access, limits)).result()

    # --- async core (the loop thread) --------------------------------------------------------------

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
        async with self._bounds.hold(host, access) as slot:
            breaker.check(host)  # it may have opened while this one waited
            try:
                with Progress.asking(host, slot):
                    resolution = await self._resolve(ref, access, host)
            except RegistryError as exc:
                if exc.transient and not isinstance(exc, RegistryUnavailable):
                    breaker.failure(str(exc), open_for=exc.retry_after)
                raise
        breaker.success()
        return resolution

    async def alist_tags(
        self, repository: ImageRef, access: RegistryAccess, limits: TagLimits | None = None
    ) -> TagListing:
        limits = limits or self._tag_limits
        host, name = api_host(repository.registry), repository.repository
        breaker = self.breaker(host)
        rate_limit: dict[str, str] = {}

        async def fetch(url: str) -> HttpResponse:
            breaker.check(host)
            async with self._bounds.hold(host, access):  # per page: a listing does not hold a slot throughout
                breaker.check(host)
                response = await self._auth.request(
                    "GET",
                    url,
                    host,
                    f"repository:{name}:pull",
                    access,
                    {"Accept": ACCEPT_TAG_LIST},
                    max_body=limits.max_page_bytes,
                )
            rate_limit.update(self._rate_limit(response, host))
            check_page(response, host, name)
            return response

        with RequestMeter() as meter:
            try:
                scheme = "http" if access.insecure else "https"
                pages = await paginate(fetch, f"{scheme}://{host}", host, name, limits)
            except RegistryError as exc:
                if exc.transient and not isinstance(exc, RegistryUnavailable):
                    breaker.failure(str(exc), open_for=exc.retry_after)
                raise
        breaker.success()
        return pages.listing(ImageRef(repository.registry, name), meter.count, rate_limit)

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
        rate_limit = self._rate_limit(head, host)
        check_status(head, host, ref)
        media_type = head.media_type
        reject_schema1(media_type, host, ref)
        try:  # validated once, as it becomes a Digest
            digest = Digest(head.headers.get("docker-content-digest"))
        except InvalidReference:
            pass
        else:
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
        rate_limit = self._rate_limit(get, host)
        check_status(get, host, ref)
        media_type = manifest_type(get, host, ref)
        verified = Digest(verified_digest(get, host, ref))
        log.debug("resolved %s via GET to %s", ref, verified)
        return Resolution(ref, verified, media_type, "GET", rate_limit)

    async def _fetch(
        self, ref: ImageRef, access: RegistryAccess, max_bytes: int | None = None
    ) -> tuple[str, bytes]:
        host = api_host(ref.registry)
        if access.head_only:
            raise GetsDisabled(f"{host}: manifest GETs are disabled for this registry", host=host)
        reference = ref.digest or ref.tag or "latest"
        url = self._url(ref, access, reference)
        async with self._bounds.hold(host, access):
            scope = f"repository:{ref.repository}:pull"
            get = await self._request("GET", url, host, scope, access, max_body=max_bytes or MAX_MANIFEST)
        self._rate_limit(get, host)
        check_status(get, host, ref)
        if ref.digest:
            verified_digest(get, host, ref, expected=ref.digest)
        body_type, _version = body_info(get.body)
        return (get.media_type if get.media_type in MANIFEST_TYPES else body_type), get.body

    def _rate_limit(self, response: HttpResponse, host: str) -> dict[str, str]:
        found = {k: response.headers.get(k) for k in RATE_LIMIT_HEADERS if k in response.headers}
        if found:
            self.rate_limits[host] = found
        return found

    # --- HTTP, retries and auth (``RegistryAuth``) -------------------------------------------------

    async def _send(
        self,
        method: str,
        url: str,
        host: str,
        headers: dict[str, str],
        params: Mapping[str, str] | None = None,
        *,
        max_body: int | None = None,
    ) -> HttpResponse:
        """One request with retries: 5xx, timeouts and resets back off with full jitter; 429 waits
        for Retry-After when the policy allows it."""
        request = HttpRequest(method, url, headers, params or {}, max_body)
        attempt = 0
        while True:
            wait: float | None
            RequestMeter.note()
            try:
                response = await self._transport.send(request, self._timeout)
            except TransportError as exc:
                if exc.timeout:  # final for a registry silent in a batch (``batch``)
                    Progress.timed_out(host, self.breaker(host), self._timeout)
                what = "timed out" if exc.timeout else "connection failed"
                error = RegistryError(f"{host}: {what} ({exc}) on {method} {url}", host=host)
                wait = self._retry.backoff(attempt, self._rng)
                if attempt + 1 >= self._retry.attempts:
                    raise error from None
            else:
                log.debug("%s %s -> %s", method, url, response.status)
                Progress.answered(host, url)
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
        self,
        method: str,
        url: str,
        host: str,
        scope: str,
        access: RegistryAccess,
        *,
        max_body: int = MAX_MANIFEST,
    ) -> HttpResponse:
        """A manifest request, with the Authorization ``RegistryAuth`` finds for it; a body over
        ``max_body`` bytes is refused (``ContentTooLarge``), not read whole."""
        try:
            return await self._auth.request(
                method, url, host, scope, access, {"Accept": ACCEPT}, max_body=max_body
            )
        except BodyTooLarge as exc:
            raise ContentTooLarge(
                f"{host}: the manifest at {url} is over {max_body} bytes", host=host, status=exc.status
            ) from None
