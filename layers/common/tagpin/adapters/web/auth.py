"""Who is signed in to the console, and the CSRF token of their session.

- ``JwtAuth`` (AWS): the HTTP API's JWT authorizer has validated the bearer token (signature,
  issuer, audience, expiry) before the function runs and passes its claims in
  ``requestContext.authorizer.jwt.claims``; a request without them is refused. The person is the
  token's ``email`` (else its ``sub``). The CSRF token is an HMAC keyed with the bearer token itself:
  only someone holding the token can compute it, and it needs no key of ours.
- ``TokenAuth`` (the local stack): the token ``tagpin local`` prints is exchanged, on the sign-in
  page, for a session cookie ``<session id>.<expiry>.<HMAC>`` signed with the session key
  (HttpOnly, SameSite=Strict, Secure except over plain HTTP on a loopback address). The person is
  ``local``. The CSRF token is an HMAC of the session id with the same key. Signing out ends the
  session on the server (``SignOuts``: a record per signed-out session in the state table, until
  the session would have expired): a copy of the cookie is refused from then on, and with it every
  form of that session (its CSRF token belongs to a session that is no more).

Secrets (the token, the key, the bearer token) are compared with ``hmac.compare_digest`` only, never
logged and never rendered; a CSRF token is derived from them, never one of them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

COOKIE = "tagpin_session"
SESSION_TTL_S = 8 * 3600
WHO_LIMIT = 200
_SESSION = re.compile(r"^(?P<sid>[A-Za-z0-9_-]{16,64})\.(?P<exp>\d{1,12})\.(?P<sig>[A-Za-z0-9_-]{43})$")
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class Principal:
    who: str  # recorded with what they do
    csrf: str  # the CSRF token of this session (hex)


def same(expected: str, given: str) -> bool:
    """Constant-time equality of two strings of any length or content."""
    return hmac.compare_digest(
        hashlib.sha256(expected.encode("utf-8", "surrogatepass")).digest(),
        hashlib.sha256(given.encode("utf-8", "surrogatepass")).digest(),
    )


def _mac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def header(event: Mapping[str, Any], name: str) -> str:
    headers = event.get("headers") or {}
    return str(next((v for k, v in headers.items() if k.lower() == name), ""))


def cookie(event: Mapping[str, Any], name: str) -> str | None:
    """A cookie of the request (payload 2.0 carries them in ``cookies``, as API Gateway sends them)."""
    for raw in event.get("cookies") or []:
        key, sep, value = str(raw).partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None


class SignOuts(Protocol):
    """The sessions signed out before they expired (``tagpin.adapters.dynamodb.sessions``)."""

    def end(self, session: str, expires_at_s: int, now_ms: int) -> None: ...

    def ended(self, session: str) -> bool: ...


class JwtAuth:
    """The HTTP API's JWT authorizer signed the person in; the function reads its claims."""

    signs_in = False

    def principal(self, event: Mapping[str, Any]) -> Principal | None:
        authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
        claims = (authorizer.get("jwt") or {}).get("claims") or {}
        who = claims.get("email") or claims.get("sub")
        scheme, _, token = header(event, "authorization").strip().partition(" ")
        if not isinstance(who, str) or not who.strip() or scheme.lower() != "bearer" or not token.strip():
            return None
        who = who.strip()[:WHO_LIMIT]
        csrf = hmac.new(token.strip().encode(), b"tagpin-console-csrf:" + who.encode(), hashlib.sha256)
        return Principal(who, csrf.hexdigest())


class TokenAuth:
    """A sign-in token exchanged for an HMAC-signed session cookie (the local stack)."""

    signs_in = True

    def __init__(
        self,
        token: str,
        key: bytes,
        sign_outs: SignOuts,
        clock: Callable[[], float] = time.time,
        ttl_s: int = SESSION_TTL_S,
    ) -> None:
        self._token = token
        self._key = key
        self._sign_outs = sign_outs
        self._clock = clock
        self.ttl_s = ttl_s

    def check_token(self, given: str) -> bool:
        return same(self._token, given)

    def issue(self) -> str:
        """A new session's cookie value."""
        payload = f"{secrets.token_urlsafe(24)}.{int(self._clock()) + self.ttl_s}"
        return f"{payload}.{_b64(_mac(self._key, 'session:' + payload))}"

    def _session(self, event: Mapping[str, Any]) -> tuple[str, int] | None:
        """The id and expiry (epoch s) of the request's session: signed with our key, not expired."""
        value = cookie(event, COOKIE)
        match = _SESSION.match(value or "")
        if match is None:
            return None
        payload = f"{match['sid']}.{match['exp']}"
        if not same(_b64(_mac(self._key, "session:" + payload)), match["sig"]):
            return None
        if int(match["exp"]) <= self._clock():
            return None
        return match["sid"], int(match["exp"])

    def principal(self, event: Mapping[str, Any]) -> Principal | None:
        session = self._session(event)
        if session is None or self._sign_outs.ended(session[0]):  # read only for a signed cookie
            return None
        return Principal("local", _mac(self._key, "csrf:" + session[0]).hex())

    def sign_out(self, event: Mapping[str, Any]) -> None:
        """End the request's session on the server: its cookie is refused from now on."""
        session = self._session(event)
        if session is not None:
            self._sign_outs.end(session[0], session[1], int(self._clock() * 1000))


def secure_cookies(event: Mapping[str, Any]) -> bool:
    """Cookies are Secure, except over plain HTTP to a loopback address (the local stack)."""
    host = header(event, "host")
    host = host.split("]")[0] + "]" if host.startswith("[") else host.rsplit(":", 1)[0]
    plain = header(event, "x-forwarded-proto").lower() == "http"
    return not (plain and host in _LOOPBACK)


Auth = JwtAuth | TokenAuth
