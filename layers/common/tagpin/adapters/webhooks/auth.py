"""How each sender proves it is who it says: one scheme per source, configured from the webhook secret.

The webhook secret (``TAGPIN_WEBHOOK_SECRET``) is one JSON object keyed by source. Each entry is
an object validated by ``SourceSecret`` (unknown keys are refused, so a typo does not silently
leave a source unauthenticated); a bare string is shorthand for the field the source's scheme
needs most (``token``, or ``hmac`` for signing senders), which keeps the original
``{"distribution": "<token>"}`` form working::

    {
      "distribution": {"token": "..."},                    # Authorization: Bearer <token>
      "harbor":       {"token": "..."},                    # Harbor's "Auth Header" value
      "acr":          {"token": "...", "header": "x-tagpin-token"},
      "generic":      {"token": "..."},
      "dockerhub":    {"token": "..."},                    # ...?token=<token> in the URL
      "quay":         {"token": "..."},
      "github":       {"hmac": "..."},                     # X-Hub-Signature-256
      "nexus":        {"hmac": "...", "registries": {"docker-hosted": "nexus.example.com:8443"}},
      "artifactory":  {"token": "...", "registries": {"docker-local": "acme.jfrog.io/docker-local"}},
      "gar":          {"audience": "...", "email": "...@....iam.gserviceaccount.com",
                       "jwks": {"keys": [...]}, "token": "... (optional alternative)"}
    }

Why keys for Pub/Sub are configured rather than fetched: the function has no route to Google's
certificate endpoint in every install (and none in the local stack); Google rotates its keys
every few days, so production installs refresh ``jwks`` in the secret (a scheduled copy of
https://www.googleapis.com/oauth2/v3/certs) or use the URL token instead.

Every comparison is constant-time (``hmac.compare_digest``); secret values are ``SecretStr`` and
never appear in a message or a log line. A source without a usable secret is refused (401).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from tagpin.adapters.webhooks import describe
from tagpin.ports.webhooks import Request, SourceOptions, WebhookError

if TYPE_CHECKING:
    import jwt

logger = logging.getLogger(__name__)

GOOGLE_ISSUER = "https://accounts.google.com"
JWT_LEEWAY_S = 60


class SourceSecret(BaseModel):
    """One source's entry in the webhook secret."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: SecretStr | None = None  # compared with what the sender sends (header or URL parameter)
    hmac: SecretStr | None = None  # key the sender signs the raw body with
    header: str = "authorization"  # static-header senders: the header carrying the token
    audience: str | None = None  # Pub/Sub OIDC: expected ``aud`` (default of Pub/Sub: the push URL)
    issuer: str = GOOGLE_ISSUER
    email: str | None = None  # Pub/Sub OIDC: the push subscription's service account
    jwks: dict[str, Any] | None = None  # Pub/Sub OIDC: {"keys": [JWK, ...]} (Google's certificates)
    registries: dict[str, str] = {}  # non-secret: repository key -> pull prefix (Nexus, Artifactory)

    @property
    def options(self) -> SourceOptions:
        return SourceOptions(registries={k: v.strip() for k, v in self.registries.items()})


class Scheme(Protocol):
    """An authentication scheme. ``shorthand``: the field a bare-string secret entry sets."""

    @property
    def name(self) -> str: ...

    @property
    def shorthand(self) -> str: ...

    def configured(self, secret: SourceSecret) -> bool: ...

    def verify(self, request: Request, secret: SourceSecret) -> None:
        """Return when the request is authentic; raise ``WebhookError(401)`` otherwise."""


def load_secret(raw: object, scheme: Scheme, source: str) -> SourceSecret | None:
    """The source's entry, validated; None when absent or empty. An invalid entry is a 401
    (closed) whose message names the field, never the value."""
    data = {scheme.shorthand: raw} if isinstance(raw, str) and raw else raw or {}
    try:
        secret = SourceSecret.model_validate(data)
    except ValidationError as exc:
        detail = describe(exc.errors(include_url=False, include_input=False))
        logger.error("webhook secret entry is invalid", extra={"source": source, "detail": detail})
        raise WebhookError(
            401, f"the webhook secret for source {source!r} is invalid ({detail}); refusing input"
        ) from None
    return secret if scheme.configured(secret) else None


def _denied(reason: str = "missing or invalid credentials") -> WebhookError:
    return WebhookError(401, reason)


def _equal(given: str | bytes, expected: str | bytes) -> bool:
    a = given.encode() if isinstance(given, str) else given
    b = expected.encode() if isinstance(expected, str) else expected
    return hmac.compare_digest(a, b)


def _value(secret: SecretStr | None) -> str:
    return "" if secret is None else secret.get_secret_value()


@dataclass(frozen=True)
class StaticHeader:
    """The sender can only send a fixed header (distribution, Harbor, ACR, CI). ``Bearer <token>``
    and the bare token are both accepted."""

    name: str = "static header"
    shorthand: str = "token"

    def configured(self, secret: SourceSecret) -> bool:
        return bool(_value(secret.token))

    def verify(self, request: Request, secret: SourceSecret) -> None:
        given = request.headers.get(secret.header.lower()) or ""
        expected = _value(secret.token)
        # Both compared (no short circuit): the time does not tell which form was close.
        if not (_equal(given, "Bearer " + expected) | _equal(given, expected)):
            raise _denied()


@dataclass(frozen=True)
class UrlToken:
    """Senders that cannot sign or add headers (Docker Hub, Quay): a secret ``token`` query
    parameter in the webhook URL. Weaker (URLs end up in logs), hence re-resolution matters most."""

    param: str = "token"
    name: str = "URL token"
    shorthand: str = "token"

    def configured(self, secret: SourceSecret) -> bool:
        return bool(_value(secret.token))

    def verify(self, request: Request, secret: SourceSecret) -> None:
        if not _equal(request.query.get(self.param) or "", _value(secret.token)):
            raise _denied()


@dataclass(frozen=True)
class HmacSignature:
    """An HMAC of the raw body in a header, as lower-case hex after an optional prefix."""

    header: str
    digest: Callable[[], Any]
    prefix: str = ""
    name: str = "HMAC signature"
    shorthand: str = "hmac"

    def configured(self, secret: SourceSecret) -> bool:
        return bool(_value(secret.hmac))

    def verify(self, request: Request, secret: SourceSecret) -> None:
        given = (request.headers.get(self.header) or "").strip()
        mac = hmac.new(_value(secret.hmac).encode(), request.body, self.digest).hexdigest()
        if not _equal(given.lower(), self.prefix + mac):
            raise _denied("missing or invalid signature")


@dataclass(frozen=True)
class JFrogEventAuth:
    """Artifactory's ``X-JFrog-Event-Auth``: the secret token itself, or (with "use secret for
    payload signing") the hex HMAC-SHA256 of the body keyed with it."""

    header: str = "x-jfrog-event-auth"
    name: str = "JFrog event auth"
    shorthand: str = "token"

    def configured(self, secret: SourceSecret) -> bool:
        return bool(_value(secret.token))

    def verify(self, request: Request, secret: SourceSecret) -> None:
        given = (request.headers.get(self.header) or "").strip()
        token = _value(secret.token)
        mac = hmac.new(token.encode(), request.body, hashlib.sha256).hexdigest()
        if not (_equal(given, token) | _equal(given.lower(), mac)):
            raise _denied()


@lru_cache(maxsize=8)
def _keyset(jwks_json: str) -> jwt.PyJWKSet:
    import jwt

    return jwt.PyJWKSet.from_json(jwks_json)


@dataclass(frozen=True)
class PubSubOidc:
    """A Pub/Sub push subscription's OIDC token: ``Authorization: Bearer <JWT>`` signed by Google.
    Checks the signature against the configured keys (RS256 only), ``aud``, ``iss``, ``exp``
    (``iat`` required), the service account ``email`` and ``email_verified``."""

    name: str = "Pub/Sub OIDC token"
    shorthand: str = "token"

    def configured(self, secret: SourceSecret) -> bool:
        return bool(secret.audience and secret.email and secret.jwks)

    def verify(self, request: Request, secret: SourceSecret) -> None:
        import jwt  # only here: PyJWT + cryptography stay out of every other cold start

        scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _denied("missing bearer token")
        try:
            keys = _keyset(json.dumps(secret.jwks, sort_keys=True))
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            logger.error("webhook secret: the configured jwks cannot be used")
            raise _denied("the configured signing keys are unusable; refusing input") from None
        try:
            kid = jwt.get_unverified_header(token.strip()).get("kid")
            key = next((k for k in keys.keys if k.key_id == kid), None)
            if key is None:
                raise _denied("token signed with an unknown key")
            claims = jwt.decode(
                token.strip(),
                key=key,
                algorithms=["RS256"],
                audience=secret.audience,
                issuer=secret.issuer,
                leeway=JWT_LEEWAY_S,
                options={"require": ["exp", "iat", "aud", "iss"]},
            )
        except (jwt.PyJWTError, ValueError, TypeError, KeyError, AttributeError):
            raise _denied("invalid bearer token") from None
        email = claims.get("email")
        if (
            not isinstance(email, str)
            or not _equal(email, secret.email or "")
            or not claims.get("email_verified")
        ):
            raise _denied("token is not from the configured service account")


@dataclass(frozen=True)
class AnyOf:
    """Several schemes for one source (Pub/Sub: OIDC token, or a URL token): the request must
    pass one that is configured."""

    schemes: tuple[Scheme, ...]
    name: str = "any of"
    shorthand: str = "token"

    def configured(self, secret: SourceSecret) -> bool:
        return any(s.configured(secret) for s in self.schemes)

    def verify(self, request: Request, secret: SourceSecret) -> None:
        failure: WebhookError | None = None
        for scheme in self.schemes:
            if not scheme.configured(secret):
                continue
            try:
                scheme.verify(request, secret)
                return
            except WebhookError as exc:
                failure = failure or exc
        raise failure or _denied()


@dataclass(frozen=True)
class EventBridgeOnly:
    """ECR: events arrive from EventBridge, authorised by IAM (the rule may invoke the function).
    Nothing over HTTP is accepted as an ECR event."""

    name: str = "EventBridge (IAM)"
    shorthand: str = "token"
    note: str = field(default="ECR events arrive through EventBridge, never over HTTP")

    def configured(self, secret: SourceSecret) -> bool:
        return True  # needs no secret; verify() refuses every HTTP request

    def verify(self, request: Request, secret: SourceSecret) -> None:
        raise _denied(self.note)
