"""Registry credentials per host, by kind: secrets (SSM or Secrets Manager) and ECR authorization tokens.

``CredentialStore.access(host)`` gives the ``RegistryAccess`` the registry client needs. Secrets
are read through a ``secret_json`` callable (powertools parameters in Lambda, cached across warm
invocations); ECR tokens come from ``ecr:GetAuthorizationToken`` per (account, region, role) and
are kept until an hour before they expire (they last 12 hours). Nothing here logs a secret.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tagpin.domain.config import Registry, RegistryKind, TagpinConfig, ecr_host_parts
from tagpin.ports.registry import Credentials, RegistryAccess

log = logging.getLogger(__name__)

GAR_KEY_USER = "_json_key"
GAR_TOKEN_USER = "oauth2accesstoken"  # noqa: S105 (a fixed user name, not a secret)
ECR_USER = "AWS"
ECR_MARGIN = 3600.0  # drop an ECR token an hour before it expires
ECR_MIN_TTL = 300.0  # an expiry already past or missing: use the token, but ask again soon


class CredentialsError(ValueError):
    """A secret does not hold what its registry kind needs. The message names the fields, never values."""


def secret_credentials(kind: RegistryKind, data: dict[str, Any], secret: str) -> Credentials:
    """Credentials from a secret's JSON, by registry kind (see ``RegistryKind``)."""
    if kind is RegistryKind.GAR:
        key = data.get("_json_key", data if data.get("type") == "service_account" else None)
        if isinstance(key, dict | str) and key:
            text = key if isinstance(key, str) else json.dumps(key, separators=(",", ":"))
            return Credentials(GAR_KEY_USER, text)
        if isinstance(data.get("access_token"), str) and data["access_token"]:
            return Credentials(GAR_TOKEN_USER, data["access_token"])
    username = data.get("username")
    password = data.get("password", data.get("token"))
    if isinstance(username, str) and username and isinstance(password, str) and password:
        return Credentials(username, password)
    fields = ", ".join(sorted(data)) or "none"
    raise CredentialsError(
        f"secret {secret} for a {kind.value} registry needs "
        + (
            "a service-account key (_json_key), access_token, or username and password"
            if kind is RegistryKind.GAR
            else "username and password (or token)"
        )
        + f"; it has: {fields}"
    )


@dataclass(frozen=True)
class EcrKey:
    account: str | None
    region: str
    role_arn: str | None


class EcrTokens:
    """ECR authorization tokens, cached per account/region/role for most of their 12 hours.

    ``client(region, role_arn)`` returns a boto3 ECR client (through the assumed role when given)."""

    def __init__(
        self, client: Callable[[str, str | None], Any], clock: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._clock = clock
        self._cache: dict[EcrKey, tuple[Credentials, float]] = {}
        self._lock = threading.Lock()
        self.fetches = 0

    def get(self, key: EcrKey) -> Credentials:
        with self._lock:
            cached = self._cache.get(key)
            if cached and cached[1] > self._clock():
                return cached[0]
            # registryIds is deprecated: the token is valid for every registry the principal may read.
            data = self._client(key.region, key.role_arn).get_authorization_token()
            self.fetches += 1
            entry = data["authorizationData"][0]
            user, _, password = base64.b64decode(entry["authorizationToken"]).decode().partition(":")
            expires = entry.get("expiresAt")
            now = self._clock()
            until = expires.timestamp() - ECR_MARGIN if isinstance(expires, datetime) else 0.0
            until = max(until, now + ECR_MIN_TTL)
            credentials = Credentials(user or ECR_USER, password)
            self._cache[key] = (credentials, until)
            log.debug("fetched an ECR token for %s/%s, kept %.0fs", key.account, key.region, until - now)
            return credentials

    def invalidate(self, key: EcrKey) -> None:
        with self._lock:
            self._cache.pop(key, None)


class CredentialStore:
    """Per-host access from the configuration: the composition root builds one per container."""

    def __init__(
        self,
        config: Callable[[], TagpinConfig],
        secret_json: Callable[[str], dict[str, Any]],
        ecr: EcrTokens | None = None,
    ) -> None:
        self._config = config
        self._secret_json = secret_json
        self._ecr = ecr

    def access(self, host: str) -> RegistryAccess:
        """Credentials are fetched lazily, so one bad secret only fails its own registry's tags."""
        settings: Registry = self._config().registry(host)
        kind = settings.kind_for(host)
        credentials: Credentials | None = None
        invalidate: Callable[[], None] | None = None
        if kind is RegistryKind.ECR:
            key = self._ecr_key(host, settings)
            if self._ecr is None:
                raise CredentialsError(f"{host}: ECR registry but no ECR token source configured")
            ecr = self._ecr
            credentials = ecr.get(key)
            invalidate = lambda: ecr.invalidate(key)  # noqa: E731
        elif settings.credentials_secret:
            data = self._secret_json(settings.credentials_secret)
            credentials = secret_credentials(kind, data, settings.credentials_secret)
        return RegistryAccess(
            insecure=settings.insecure,
            credentials=credentials,
            head_only=settings.head_only_for(host),
            max_concurrency=settings.max_concurrency,
            invalidate=invalidate,
        )

    @staticmethod
    def _ecr_key(host: str, settings: Registry) -> EcrKey:
        parts = ecr_host_parts(host)
        region = (settings.ecr.region if settings.ecr else None) or (parts[1] if parts else None)
        if region is None:  # the configuration validator already refuses this
            raise CredentialsError(f"{host}: ECR registry without a region")
        return EcrKey(parts[0] if parts else None, region, settings.ecr.role_arn if settings.ecr else None)
