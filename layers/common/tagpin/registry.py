"""Resolve a tag to the digest it points to now (Registry HTTP API v2 / OCI distribution).

``HEAD /v2/<name>/manifests/<tag>`` with index-capable Accept types, ``Docker-Content-Digest`` verbatim,
GET + sha256 of the exact bytes when the header is missing, and the bearer-token flow with a token
cache. For multi-arch images the digest is the index digest. No retries here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import httpx

from tagpin.refs import ImageRef, is_digest

log = logging.getLogger(__name__)

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_TYPES = (OCI_INDEX, DOCKER_MANIFEST_LIST, OCI_MANIFEST, DOCKER_MANIFEST_V2)
ACCEPT = ", ".join(MANIFEST_TYPES)
SCHEMA1_TYPES = frozenset(
    {
        "application/vnd.docker.distribution.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v1+prettyjws",
    }
)
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
RATE_LIMIT_HEADERS = ("ratelimit-limit", "ratelimit-remaining")
TOKEN_DEFAULT_TTL = 60.0
TOKEN_MARGIN = 10.0
_HASHES = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class RegistryAccess:
    insecure: bool = False  # plain http://
    credentials: Credentials | None = None


@dataclass(frozen=True)
class Resolution:
    ref: ImageRef  # what was resolved (the tag, or the digest when the ref has no tag)
    digest: str
    media_type: str
    method: str  # "HEAD" | "GET"
    rate_limit: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def pinned(self) -> ImageRef:
        """``registry/repo:tag@digest``."""
        return self.ref.with_digest(self.digest)


class RegistryError(Exception):
    """A registry answered badly or not at all. Messages never carry credentials or tokens."""

    def __init__(self, message: str, *, host: str, status: int | None = None) -> None:
        super().__init__(message)
        self.host = host
        self.status = status


class ManifestNotFound(RegistryError):
    pass


class AuthError(RegistryError):
    pass


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


def _media_type(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower()


class RegistryClient:
    def __init__(
        self,
        access: Callable[[str], RegistryAccess] | None = None,
        http: httpx.Client | None = None,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._access = access or (lambda _registry: RegistryAccess())
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client(follow_redirects=True)
        self._timeout = timeout
        self._clock = clock
        self._challenges: dict[str, Challenge] = {}  # api host -> last auth challenge seen
        self._tokens: dict[tuple[str, str, str, str], tuple[str, float]] = {}  # key -> (token, expires)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    # --- resolution --------------------------------------------------------------------------------

    def resolve(self, ref: ImageRef) -> Resolution:
        """Digest the tag (or, for a digest-only ref, the digest) points to, as the registry reports it."""
        reference = ref.tag or ref.digest
        if reference is None:
            raise ValueError(f"{ref} has neither tag nor digest")
        access = self._access(ref.registry)
        host = api_host(ref.registry)
        url = f"{'http' if access.insecure else 'https'}://{host}/v2/{ref.repository}/manifests/{reference}"
        scope = f"repository:{ref.repository}:pull"

        head = self._request("HEAD", url, host, scope, access)
        self._check_status(head, host, ref)
        media_type = _media_type(head)
        self._reject_schema1(media_type, host, ref)
        digest = head.headers.get("docker-content-digest", "")
        if is_digest(digest):
            log.debug("resolved %s via HEAD to %s", ref, digest)
            return Resolution(ref, digest, media_type, "HEAD", self._rate_limit(head))

        log.debug("no usable Docker-Content-Digest from HEAD %s; falling back to GET", url)
        get = self._request("GET", url, host, scope, access)
        self._check_status(get, host, ref)
        body = get.content
        body_type, schema_version = self._body_info(body)
        media_type = _media_type(get)
        self._reject_schema1(media_type, host, ref)
        if body_type and media_type not in MANIFEST_TYPES:  # e.g. served as application/json
            media_type = body_type
        if schema_version == 1:
            self._reject_schema1(f"schemaVersion 1 ({media_type or 'no media type'})", host, ref, always=True)
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        header = get.headers.get("docker-content-digest")
        if header:
            algorithm, _, hexpart = header.partition(":")
            hasher = _HASHES.get(algorithm)
            if not is_digest(header) or hasher is None or hasher(body).hexdigest() != hexpart:
                raise RegistryError(
                    f"{host}: Docker-Content-Digest {header!r} does not match the manifest of {ref}",
                    host=host,
                    status=get.status_code,
                )
            digest = header
        log.debug("resolved %s via GET to %s", ref, digest)
        return Resolution(ref, digest, media_type, "GET", self._rate_limit(get))

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

    @staticmethod
    def _rate_limit(response: httpx.Response) -> dict[str, str]:
        return {k: response.headers[k] for k in RATE_LIMIT_HEADERS if k in response.headers}

    @staticmethod
    def _check_status(response: httpx.Response, host: str, ref: ImageRef) -> None:
        status = response.status_code
        if 200 <= status < 300:
            return
        if status == 404:
            raise ManifestNotFound(f"{host}: manifest for {ref} not found", host=host, status=status)
        if status in (401, 403):
            raise AuthError(f"{host}: access to {ref} denied (HTTP {status})", host=host, status=status)
        if status == 429:
            raise RegistryError(f"{host}: rate limited (HTTP 429) resolving {ref}", host=host, status=status)
        raise RegistryError(f"{host}: HTTP {status} resolving {ref}", host=host, status=status)

    # --- HTTP and auth -----------------------------------------------------------------------------

    def _send(self, method: str, url: str, host: str, headers: dict[str, str], **kw: Any) -> httpx.Response:
        try:
            response = self._http.request(method, url, headers=headers, timeout=self._timeout, **kw)
        except httpx.TimeoutException as exc:
            raise RegistryError(
                f"{host}: timed out ({type(exc).__name__}) on {method} {url}", host=host
            ) from None
        except httpx.HTTPError as exc:
            raise RegistryError(f"{host}: {type(exc).__name__} on {method} {url}", host=host) from None
        log.debug("%s %s -> %s", method, url, response.status_code)
        return response

    def _request(
        self, method: str, url: str, host: str, scope: str, access: RegistryAccess
    ) -> httpx.Response:
        headers = {"Accept": ACCEPT}
        cached = self._cached_authorization(host, scope, access)
        if cached:
            headers["Authorization"] = cached
        response = self._send(method, url, host, headers)
        if response.status_code != 401:
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
        headers["Authorization"] = self._authorize(host, challenge, scope, access)
        response = self._send(method, url, host, headers)
        if response.status_code == 401:
            raise AuthError(f"{host}: credentials or token rejected (HTTP 401)", host=host, status=401)
        return response

    def _cached_authorization(self, host: str, scope: str, access: RegistryAccess) -> str | None:
        challenge = self._challenges.get(host)
        if challenge is None:
            return None
        if challenge.scheme == "basic":
            return self._basic(access, host) if access.credentials else None
        entry = self._tokens.get(self._token_key(challenge, scope, access))
        if entry and entry[1] > self._clock():
            return f"Bearer {entry[0]}"
        return None

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

    def _authorize(self, host: str, challenge: Challenge, scope: str, access: RegistryAccess) -> str:
        """Authorization header after a 401: Basic, or a freshly fetched bearer token (cached)."""
        if challenge.scheme == "basic":
            return self._basic(access, host)
        realm = challenge.params.get("realm")
        if not realm or not realm.startswith(("https://", "http://")):
            raise AuthError(f"{host}: bearer challenge without a usable realm", host=host, status=401)
        key = self._token_key(challenge, scope, access)
        self._tokens.pop(key, None)  # a 401 means any cached token is no good: refetch once
        params = {k: v for k, v in (("service", challenge.params.get("service")), ("scope", scope)) if v}
        headers = {"Authorization": self._basic(access, host)} if access.credentials else {}
        response = self._send("GET", realm, host, headers, params=params)
        if response.status_code in (401, 403):
            raise AuthError(
                f"{host}: token endpoint {realm} refused (HTTP {response.status_code})",
                host=host,
                status=response.status_code,
            )
        if response.status_code != 200:
            raise RegistryError(
                f"{host}: token endpoint {realm} answered HTTP {response.status_code}",
                host=host,
                status=response.status_code,
            )
        try:
            doc = response.json()
            token = doc.get("token") or doc.get("access_token")
            ttl = float(doc.get("expires_in") or TOKEN_DEFAULT_TTL)
        except (ValueError, AttributeError, TypeError):
            token, ttl = None, 0.0
        if not isinstance(token, str) or not token:
            raise AuthError(f"{host}: token endpoint {realm} returned no token", host=host, status=200)
        self._tokens[key] = (token, self._clock() + ttl - TOKEN_MARGIN)
        log.debug("fetched registry token for %s (%s), valid %.0fs", host, scope, ttl)
        return f"Bearer {token}"
