"""Run the real CNCF registry (Debian's ``docker-registry``, distribution 2.8.x) for tests and the demo.

Filesystem storage in a temp dir, plain HTTP on 127.0.0.1, optionally a notification endpoint that
receives push events (``application/vnd.docker.distribution.events.v1+json``), and optionally
authentication: ``HtpasswdAuth`` (``auth.htpasswd``: Basic, bcrypt hashes; see ``write_htpasswd``) or
``TokenAuth`` (``auth.token``: bearer tokens from a token server, e.g. ``tagpin_local.tokenserver``).
Without ``auth`` every request is anonymous and allowed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import httpx
import yaml

REGISTRY_BINARY = "/usr/bin/docker-registry"
EVENTS_MEDIA_TYPE = "application/vnd.docker.distribution.events.v1+json"


class RegistryBinaryMissing(RuntimeError):
    pass


def ensure_registry_binary(path: str | None = None) -> str:
    """Path of the registry binary, or a clear error saying how to install it."""
    for candidate in (
        path,
        os.environ.get("TAGPIN_REGISTRY_BINARY"),
        REGISTRY_BINARY,
        shutil.which("docker-registry"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RegistryBinaryMissing(
        f"the CNCF registry binary was not found at {REGISTRY_BINARY}; "
        "install it with `apt-get install docker-registry` (or set TAGPIN_REGISTRY_BINARY)"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class HtpasswdAuth:
    """Basic authentication against an htpasswd file of bcrypt hashes (``write_htpasswd``)."""

    path: Path
    realm: str = "tagpin-local"


@dataclass(frozen=True)
class TokenAuth:
    """Bearer tokens: ``realm`` is the token endpoint; tokens must be issued by ``issuer`` for
    ``service`` and signed by a certificate that chains to ``root_bundle``."""

    realm: str
    service: str
    issuer: str
    root_bundle: Path


def write_htpasswd(path: Path, users: dict[str, str]) -> HtpasswdAuth:
    """An htpasswd file with bcrypt hashes (the only kind distribution accepts)."""
    import bcrypt

    lines = [
        f"{user}:{bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds=5)).decode()}"
        for user, pw in users.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return HtpasswdAuth(path)


def auth_config(auth: HtpasswdAuth | TokenAuth | None) -> dict[str, Any]:
    if isinstance(auth, HtpasswdAuth):
        return {"htpasswd": {"realm": auth.realm, "path": str(auth.path)}}
    if isinstance(auth, TokenAuth):
        return {
            "token": {
                "realm": auth.realm,
                "service": auth.service,
                "issuer": auth.issuer,
                "rootcertbundle": str(auth.root_bundle),
            }
        }
    return {}


def registry_config(
    root: Path,
    port: int,
    notify_url: str | None,
    notify_headers: dict[str, str] | None,
    auth: HtpasswdAuth | TokenAuth | None = None,
) -> dict[str, Any]:
    """The registry config. Notification keys checked against distribution 2.8.2 (see tests)."""
    config: dict[str, Any] = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}, "fields": {"service": "registry"}},
        "storage": {
            "filesystem": {"rootdirectory": str(root / "data")},
            "delete": {"enabled": True},
            "maintenance": {"uploadpurging": {"enabled": False}},
        },
        "http": {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)},
    }
    if auth is not None:
        config["auth"] = auth_config(auth)
    if notify_url:
        config["notifications"] = {
            "endpoints": [
                {
                    "name": "tagpin",
                    "url": notify_url,
                    # http.Header in Go: every header maps to a list of values.
                    "headers": {k: [v] for k, v in (notify_headers or {}).items()},
                    # distribution delivers to an endpoint one notification at a time and sends
                    # again one not answered within ``timeout``: under a burst (50 pushes at once,
                    # bench/concurrency) a webhook answer took up to 1.3 s, and each one cut off at
                    # 1 s cost the whole line a second and a duplicate delivery. 5 s: above the
                    # webhook's answer under load, far below its 15 s limit (docs/webhooks.md).
                    "timeout": "5s",
                    "threshold": 5,
                    "backoff": "1s",
                    # Drop blob (layer/config) events and pulls; manifest pushes and deletes remain.
                    # On 2.8.2 `ignore.actions` only takes effect when some media type is ignored too
                    # (`ignore.mediatypes` or the older `ignoredmediatypes`, which are merged).
                    "ignore": {"mediatypes": ["application/octet-stream"], "actions": ["pull"]},
                }
            ]
        }
    return config


class RegistryServer:
    def __init__(
        self,
        notify_url: str | None = None,
        notify_headers: dict[str, str] | None = None,
        port: int = 0,
        binary: str | None = None,
        auth: HtpasswdAuth | TokenAuth | None = None,
    ) -> None:
        self.auth = auth
        self.notify_url = notify_url
        self.notify_headers = notify_headers
        self.port = port
        self._binary = binary
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    @property
    def pid(self) -> int | None:
        """The registry process (None when not running)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path | None:
        return Path(self._tmp.name) / "registry.log" if self._tmp else None

    def start(self, timeout: float = 20.0) -> Self:
        if self._proc is not None:
            return self
        binary = ensure_registry_binary(self._binary)
        self._tmp = tempfile.TemporaryDirectory(prefix="tagpin-registry-")
        root = Path(self._tmp.name)
        fixed_port = self.port
        for _attempt in range(3):  # a free port may be taken between probing and binding
            self.port = fixed_port or free_port()
            config_path = root / "config.yml"
            config = registry_config(root, self.port, self.notify_url, self.notify_headers, self.auth)
            config_path.write_text(yaml.safe_dump(config, sort_keys=False))
            with (root / "registry.log").open("ab") as log:
                self._proc = subprocess.Popen(
                    [binary, "serve", str(config_path)], stdout=log, stderr=subprocess.STDOUT, cwd=root
                )
            if self._wait_ready(timeout):
                return self
            if self._proc.poll() is None:
                break
            self._proc = None
            if fixed_port:
                break
        log_text = (root / "registry.log").read_text(errors="replace")[-2000:]
        self.stop()
        raise RuntimeError(f"registry did not become ready on {self.url}; log tail:\n{log_text}")

    def _wait_ready(self, timeout: float) -> bool:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=1.0) as http:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    return False
                try:  # with auth, an anonymous /v2/ is a 401: the registry is up
                    if http.get(f"{self.url}/v2/").status_code in ((200,) if self.auth is None else (401,)):
                        return True
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        return False

    def reconfigure(
        self,
        notify_url: str | None,
        notify_headers: dict[str, str] | None = None,
        *,
        auth: HtpasswdAuth | TokenAuth | Literal["keep"] | None = "keep",
    ) -> Self:
        """Restart on the same port and storage with other notification settings (and auth, when
        given; ``None`` turns it off)."""
        assert self._tmp is not None, "start() first"
        self._terminate()
        self.notify_url, self.notify_headers = notify_url, notify_headers
        if auth != "keep":
            self.auth = auth
        auth = self.auth
        root = Path(self._tmp.name)
        binary = ensure_registry_binary(self._binary)
        config = registry_config(root, self.port, notify_url, notify_headers, auth)
        (root / "config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        with (root / "registry.log").open("ab") as log:
            self._proc = subprocess.Popen(
                [binary, "serve", str(root / "config.yml")], stdout=log, stderr=subprocess.STDOUT, cwd=root
            )
        if not self._wait_ready(20.0):
            raise RuntimeError(f"registry did not come back on {self.url}")
        return self

    def _terminate(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
            self._proc = None

    def stop(self) -> None:
        self._terminate()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
