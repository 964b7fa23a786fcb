"""A small Docker registry token server (the ``auth.token`` flow) for tests, on 127.0.0.1.

``GET /token?service=...&scope=repository:<name>:pull[,push]`` with optional Basic credentials
answers ``{"token", "access_token", "expires_in", "issued_at"}``: a JWT (RS256) signed with a
self-made key whose certificate (signed by a self-made CA) travels in the ``x5c`` header; the
registry trusts the CA through ``rootcertbundle``. Known users get the actions they ask for, within
what they are granted; wrong credentials get 401; anonymous requests get a token with the access
``anonymous`` allows (none by default), so the registry answers 401 as a real one does.

Every request is recorded (``requests``) so tests can count token fetches. ``rotate_key`` replaces
the signing key and the CA (restart the registry to load the new bundle): tokens issued before are
refused from then on, as after a key rotation, and a client must fetch new ones.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import http.server
import json
import secrets
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from tagpin_local.registry_server import TokenAuth

ALL_ACTIONS = frozenset({"pull", "push"})


@dataclass(frozen=True)
class TokenRequest:
    user: str | None  # None: anonymous
    scopes: tuple[str, ...]
    status: int


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificates() -> tuple[rsa.RSAPrivateKey, bytes, bytes]:
    """(signing key, signing certificate DER, CA certificate PEM)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("tagpin local token CA"))
        .issuer_name(_name("tagpin local token CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("tagpin local token signer"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    return (
        key,
        leaf.public_bytes(serialization.Encoding.DER),
        ca.public_bytes(serialization.Encoding.PEM),
    )


class TokenServer:
    def __init__(
        self,
        users: dict[str, str] | None = None,
        *,
        service: str = "tagpin-local-registry",
        issuer: str = "tagpin-local-token-issuer",
        expires_in: int = 300,
        anonymous: frozenset[str] = frozenset(),
    ) -> None:
        self.users = dict(users or {})
        self.service = service
        self.issuer = issuer
        self.expires_in = expires_in
        self.anonymous = anonymous  # actions granted without credentials
        self.requests: list[TokenRequest] = []
        self._lock = threading.Lock()
        self._tmp = tempfile.TemporaryDirectory(prefix="tagpin-token-")
        self.root_bundle = Path(self._tmp.name) / "root.pem"
        self.rotate_key()
        self._server: http.server.ThreadingHTTPServer | None = None

    def rotate_key(self) -> None:
        """A new signing key and CA; the registry trusts it once restarted (it reads the bundle at start)."""
        key, leaf_der, ca_pem = _certificates()
        with self._lock:
            self._key, self._leaf_der = key, leaf_der
        self.root_bundle.write_bytes(ca_pem)

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/token"

    def registry_auth(self) -> TokenAuth:
        """What the registry's ``auth.token`` section needs."""
        return TokenAuth(
            realm=self.url, service=self.service, issuer=self.issuer, root_bundle=self.root_bundle
        )

    def fetches(self, user: str | None = None) -> int:
        """Tokens issued (status 200), optionally to one user."""
        with self._lock:
            return sum(1 for r in self.requests if r.status == 200 and (user is None or r.user == user))

    # --- the endpoint ----------------------------------------------------------------------------

    def _authenticate(self, header: str | None) -> tuple[bool, str | None]:
        """(accepted, user); no header is an anonymous request."""
        if not header:
            return True, None
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            return False, None
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False, None
        expected = self.users.get(user)
        ok = expected is not None and secrets.compare_digest(expected.encode(), password.encode())
        return ok, user

    def _access(self, user: str | None, scopes: list[str]) -> list[dict[str, object]]:
        granted = ALL_ACTIONS if user is not None else self.anonymous
        access: list[dict[str, object]] = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind != "repository" or not name:
                continue
            allowed = [a for a in actions.split(",") if a in granted]
            access.append({"type": "repository", "name": name, "actions": allowed})
        return access

    def _token(self, user: str | None, scopes: list[str]) -> dict[str, object]:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": user or "",
            "aud": self.service,
            "iat": now,
            "nbf": now - 10,
            "exp": now + self.expires_in,
            "jti": secrets.token_hex(8),
            "access": self._access(user, scopes),
        }
        with self._lock:
            headers = {"x5c": [base64.b64encode(self._leaf_der).decode()]}
            token = jwt.encode(claims, self._key, algorithm="RS256", headers=headers)
        return {
            "token": token,
            "access_token": token,
            "expires_in": self.expires_in,
            "issued_at": dt.datetime.fromtimestamp(now, dt.UTC).isoformat(),
        }

    def handle(self, path: str, authorization: str | None) -> tuple[int, dict[str, object]]:
        url = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qs(url.query)
        scopes = [s for value in query.get("scope", []) for s in value.split(" ") if s]
        if url.path != "/token":
            return 404, {"errors": [{"code": "NOT_FOUND"}]}
        ok, user = self._authenticate(authorization)
        body: dict[str, object]
        if not ok or query.get("service", [self.service])[0] != self.service:
            status, body = 401, {"errors": [{"code": "UNAUTHORIZED", "message": "authentication failed"}]}
        else:
            status, body = 200, self._token(user, scopes)
        with self._lock:
            self.requests.append(TokenRequest(user, tuple(scopes), status))
        return status, body

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Self:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = server.handle(self.path, self.headers.get("Authorization"))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Basic realm="tagpin-local-token"')
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="tagpin-token", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self._tmp.cleanup()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
