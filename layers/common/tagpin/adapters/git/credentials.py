"""A Git host's token, from the secret its configuration names (``gitops.hosts.<host>.credentials_secret``,
a secret under ``tagpin/git/``, which only the write-back function may read: template.yaml).

The secret holds ``{"token": "...", "username": "..."}`` (``username`` optional: ``x-access-token``,
which GitHub and GitLab accept with any token) or the token alone. The token is handed to the Git
client only; no message here or above carries it: a secret that cannot be read or holds no token
is an error naming the host and the secret.

A token is kept ``max_age`` seconds, and forgotten as soon as the server refuses it (``forget``),
so a token fixed in the secret store is used at the next delivery of the request, not minutes later.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping

from tagpin.adapters.secrets import SecretNotFound
from tagpin.domain.config import GitHost
from tagpin.ports.git import GitDenied

DEFAULT_USER = "x-access-token"
MAX_TOKEN = 4096


class GitTokens:
    """``host -> (user name, token)``, or None for a host configured without a secret (anonymous)."""

    def __init__(
        self,
        hosts: Callable[[], Mapping[str, GitHost]],
        secret_text: Callable[[str], str],
        *,
        max_age: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._hosts = hosts
        self._secret_text = secret_text
        self._max_age = max_age
        self._clock = clock
        self._kept: dict[str, tuple[float, tuple[str, str]]] = {}
        self._lock = threading.Lock()

    def __call__(self, host: str) -> tuple[str, str] | None:
        configured = self._hosts().get(host)
        name = configured.credentials_secret if configured is not None else None
        if name is None:
            return None
        with self._lock:
            kept = self._kept.get(host)
        if kept is not None and self._clock() - kept[0] < self._max_age:
            return kept[1]
        credentials = self._read(host, name)
        with self._lock:
            self._kept[host] = (self._clock(), credentials)
        return credentials

    def forget(self, host: str) -> None:
        """The server refused the host's token: read it again next time."""
        with self._lock:
            self._kept.pop(host, None)

    def _read(self, host: str, name: str) -> tuple[str, str]:
        try:
            text = self._secret_text(name)
        except SecretNotFound as exc:
            raise GitDenied(
                f"{host}: the token's secret {name} cannot be read ({type(exc).__name__}); create it, "
                "or let the write-back function read it (docs/gitops.md, credentials)"
            ) from None
        return _parse(host, name, text)


def _parse(host: str, name: str, text: str) -> tuple[str, str]:
    text = text.strip()
    user, token = DEFAULT_USER, text
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            raise GitDenied(f"{host}: the secret {name} is neither JSON nor a token") from None
        found = value.get("token") if isinstance(value, dict) else None
        named = value.get("username") if isinstance(value, dict) else None
        if not isinstance(found, str):
            raise GitDenied(f'{host}: the secret {name} holds no "token" (a string)')
        token = found.strip()
        if isinstance(named, str) and named.strip():
            user = named.strip()
    if not token or len(token) > MAX_TOKEN or any(c.isspace() or not c.isprintable() for c in token):
        raise GitDenied(f"{host}: the secret {name} holds no usable token (one line, no spaces)")
    return user, token
