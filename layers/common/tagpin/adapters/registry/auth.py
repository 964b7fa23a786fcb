"""Registry authentication: the ``WWW-Authenticate`` challenge parser and the bearer/basic flow.

A request goes out with the Authorization the host's last challenge calls for (a cached bearer
token, or Basic credentials); a 401 teaches the challenge, fetches a token from the realm (one
fetch per key at a time, shared by every concurrent request) and retries once. Tokens are cached
per (realm, service, scope, user) until shortly before they expire.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from tagpin.adapters.registry.http import BodyTooLarge, HttpResponse
from tagpin.ports.registry import AuthError, RegistryAccess, RegistryError

log = logging.getLogger(__name__)

TOKEN_DEFAULT_TTL = 60.0
TOKEN_MARGIN = 10.0
# A token answer's ``expires_in`` is kept within these bounds (see ``token_ttl``). The floor leaves
# a token cached for 5 s past the margin, so a burst of requests shares one (the distribution spec
# says a token should not live under 60 s; a registry whose tokens do costs a 401 and a fetch, as an
# expired token would). The ceiling is an hour (Docker Hub issues 300 s, most others up to 3600 s;
# the default of 60 s as the ceiling would fetch their tokens five to sixty times as often): a token
# the registry stops taking earlier is dropped at its first 401 and fetched anew.
TOKEN_MIN_TTL = 15.0
TOKEN_MAX_TTL = 3600.0
# A token endpoint's answer (a JSON document of a token or two, a few KB); longer is refused, not read.
MAX_TOKEN_ANSWER = 1024 * 1024


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


def token_ttl(expires_in: object) -> float:
    """The lifetime to cache a token for, from its answer's ``expires_in``: the default when it is
    missing, no finite number (an object, a list, a string, a boolean, NaN, an infinity) or none over
    zero (a token expired when issued: not a lifetime); else the number within ``TOKEN_MIN_TTL`` and
    ``TOKEN_MAX_TTL``."""
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
        return TOKEN_DEFAULT_TTL
    try:
        ttl = float(expires_in)
    except OverflowError:  # an int too large for a float: infinite, as the answer reads it
        return TOKEN_DEFAULT_TTL
    if not math.isfinite(ttl) or ttl <= 0:
        return TOKEN_DEFAULT_TTL
    return min(max(ttl, TOKEN_MIN_TTL), TOKEN_MAX_TTL)


class Send(Protocol):
    """``RegistryClient._send``: one request with retries."""

    def __call__(
        self,
        method: str,
        url: str,
        host: str,
        headers: dict[str, str],
        params: Mapping[str, str] | None = None,
        *,
        max_body: int | None = None,
    ) -> Awaitable[HttpResponse]: ...


class RegistryAuth:
    """The challenge/token flow and the token cache of one ``RegistryClient``; touched only from
    its loop thread."""

    def __init__(self, send: Send, clock: Callable[[], float]) -> None:
        self._send = send
        self._clock = clock
        self._challenges: dict[str, Challenge] = {}  # api host -> last auth challenge seen
        self.tokens: dict[tuple[str, str, str, str], tuple[str, float]] = {}  # key -> (token, expires)
        self._token_fetches: dict[tuple[str, str, str, str], asyncio.Future[str]] = {}

    async def request(
        self,
        method: str,
        url: str,
        host: str,
        scope: str,
        access: RegistryAccess,
        base_headers: Mapping[str, str],
        *,
        max_body: int | None = None,
    ) -> HttpResponse:
        """``method url`` with ``base_headers`` plus the Authorization the host asks for (learnt from a
        401 and retried once). ``max_body``: see ``HttpRequest``."""
        headers = dict(base_headers)
        # before the host's first challenge: none (and no coroutine per request to say so)
        cached = await self._cached_authorization(host, scope, access) if host in self._challenges else None
        if cached:
            headers["Authorization"] = cached
        response = await self._send(method, url, host, headers, max_body=max_body)
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
        response = await self._send(method, url, host, headers, max_body=max_body)
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
            cached = self.tokens.get(key)
            if cached is None or f"Bearer {cached[0]}" == rejected:
                self.tokens.pop(key, None)
        entry = self.tokens.get(key)
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
        if access.credentials and realm.startswith("http://") and not access.insecure:
            raise AuthError(
                f"{host}: bearer realm {realm} is plain http://; the credentials are not sent over it",
                host=host,
                status=401,
            )
        params = {k: v for k, v in (("service", challenge.params.get("service")), ("scope", scope)) if v}
        headers = {"Authorization": self._basic(access, host)} if access.credentials else {}
        try:
            response = await self._send("GET", realm, host, headers, params, max_body=MAX_TOKEN_ANSWER)
        except BodyTooLarge as exc:
            raise AuthError(
                f"{host}: token endpoint {realm} answered over {exc.limit} bytes",
                host=host,
                status=exc.status,
            ) from None
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
            # integers read as floats: one of 5,000 digits is infinite (the default lifetime), not a
            # ValueError (int's digit limit) that reads the whole answer as no token
            doc = json.loads(response.body, parse_int=float)
            token = doc.get("token") or doc.get("access_token")
            ttl = token_ttl(doc.get("expires_in"))
        except (ValueError, AttributeError, TypeError, RecursionError):
            token, ttl = None, 0.0
        if not isinstance(token, str) or not token:
            raise AuthError(f"{host}: token endpoint {realm} returned no token", host=host, status=200)
        self.tokens[key] = (token, self._clock() + ttl - TOKEN_MARGIN)
        log.debug("fetched registry token for %s (%s), valid %.0fs", host, scope, ttl)
        return token
