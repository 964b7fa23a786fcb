"""EKS's authentication of a local cluster: the API server's token webhook, answered as EKS answers it.

An EKS cluster authenticates a bearer token ``k8s-aws-v1.<base64url presigned URL>`` (what ``aws eks
get-token`` and tagpin's ``tagpin.adapters.kubernetes.auth.eks_token`` make) with a token webhook
(aws-iam-authenticator): it checks that the URL is a presigned STS ``GetCallerIdentity`` for a
regional or global STS host, with ``x-k8s-aws-id`` among the signed headers, calls it with the
cluster's name in that header, and maps the caller's ARN to a Kubernetes user and groups by the
cluster's access entries. :class:`EksAuthenticator` does the same for a local API server
(``--authentication-token-webhook-config-file``), with two local differences:

- STS is moto: the presigned query is sent to moto's endpoint instead of ``sts.<region>.amazonaws.com``,
  and the presigned credential (``X-Amz-Credential``, which moto does not read from a query) goes
  in an ``Authorization`` header, where moto reads the caller's access key. moto checks no
  signature, as it checks none anywhere.
- The access entries are set by the local stack (:meth:`EksAuthenticator.configure`): principal
  ARNs (an IAM user, or a role, which matches its assumed-role sessions, as EKS canonicalises them)
  to Kubernetes groups, which docs/rbac.yaml's ClusterRoleBindings name.

Any other token is answered "not authenticated" (ServiceAccount tokens and client certificates are
the API server's own and never reach the webhook).
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .pki import CertificateAuthority

PREFIX = "k8s-aws-v1."
_STS_HOST = re.compile(r"^sts(\.[a-z0-9-]+)?\.amazonaws\.com(\.cn)?$")
_ARN = re.compile(r"^arn:(aws[a-z-]*):(iam|sts)::(\d{12}):(user|role|assumed-role)/(.+)$")


@dataclass
class AccessEntries:
    """One EKS cluster's name and access entries (principal ARN -> Kubernetes groups)."""

    cluster: str
    sts_endpoint: str
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)


def canonical(arn: str) -> tuple[str, str] | None:
    """(the principal ARN an access entry names, the user name EKS gives): an assumed-role session
    ``arn:aws:sts::1:assumed-role/R/S`` is the role ``arn:aws:iam::1:role/R``, user name the session
    ARN; an IAM user is itself."""
    found = _ARN.match(arn)
    if found is None:
        return None
    partition, _service, account, kind, rest = found.groups()
    if kind == "assumed-role":
        role = rest.split("/", 1)[0]
        return f"arn:{partition}:iam::{account}:role/{role}", arn
    return f"arn:{partition}:iam::{account}:{kind}/{rest}", f"arn:{partition}:iam::{account}:{kind}/{rest}"


class EksAuthenticator:
    """The token webhook of one API server, served on 127.0.0.1 with a certificate of the cluster's CA."""

    def __init__(self, ca: CertificateAuthority, directory: Path) -> None:
        self._lock = threading.Lock()
        self._entries: AccessEntries | None = None
        self.reviews = 0  # tokens reviewed
        serving = ca.serving("eks-authenticator")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(serving.cert, serving.key)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        # the handshake then happens in the handler's thread, not in the accept loop
        self._server.socket = context.wrap_socket(
            self._server.socket, server_side=True, do_handshake_on_connect=False
        )
        self._server.authenticator = self  # type: ignore[attr-defined]
        self.config = directory / "eks-authenticator.kubeconfig"
        port = self._server.server_address[1]
        self.config.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "eks-authenticator",
                            "cluster": {
                                "server": f"https://127.0.0.1:{port}/authenticate",
                                "certificate-authority": str(ca.pair.cert),
                            },
                        }
                    ],
                    "users": [{"name": "kube-apiserver", "user": {}}],
                    "contexts": [
                        {
                            "name": "webhook",
                            "context": {"cluster": "eks-authenticator", "user": "kube-apiserver"},
                        }
                    ],
                    "current-context": "webhook",
                }
            )
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="eks-authn", daemon=True)

    def start(self) -> EksAuthenticator:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def configure(self, entries: AccessEntries | None) -> None:
        """This cluster as an EKS cluster (its name, moto's STS, its access entries); None: not one."""
        with self._lock:
            self._entries = entries

    def review(self, token: str) -> dict[str, Any] | None:
        """The user a token authenticates (``username``, ``uid``, ``groups``), else None."""
        with self._lock:
            self.reviews += 1
            entries = self._entries
        if entries is None or not token.startswith(PREFIX):
            return None
        try:
            url = base64.urlsafe_b64decode(token[len(PREFIX) :] + "=" * (-len(token) % 4)).decode()
        except ValueError:
            return None
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parts.query)
        signed = (query.get("X-Amz-SignedHeaders") or [""])[0].split(";")
        if (
            parts.scheme != "https"
            or not _STS_HOST.match(parts.hostname or "")
            or query.get("Action") != ["GetCallerIdentity"]
            or "x-k8s-aws-id" not in signed
            or not query.get("X-Amz-Credential")
        ):
            return None
        arn = _caller(entries, parts.query, query["X-Amz-Credential"][0])
        principal = canonical(arn or "")
        if principal is None or principal[0] not in entries.groups:
            return None
        return {
            "username": principal[1],
            "uid": f"aws-iam-authenticator:{arn}",
            "groups": list(entries.groups[principal[0]]),
        }


def _caller(entries: AccessEntries, query: str, credential: str) -> str | None:
    """The caller's ARN: the presigned GetCallerIdentity asked of moto."""
    request = urllib.request.Request(  # noqa: S310 (moto's endpoint on 127.0.0.1)
        f"{entries.sts_endpoint.rstrip('/')}/?{query}",
        headers={
            "x-k8s-aws-id": entries.cluster,
            "Authorization": f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders=host, Signature=0",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310
            body = answer.read().decode()
    except OSError:
        return None
    found = re.search(r"<Arn>([^<]+)</Arn>", body)
    return found.group(1) if found else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        authenticator: EksAuthenticator = self.server.authenticator  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        try:
            review = json.loads(self.rfile.read(length) or b"{}")
            token = str((review.get("spec") or {}).get("token") or "")
        except ValueError:
            review, token = {}, ""
        user = authenticator.review(token)
        status: dict[str, Any] = {"authenticated": user is not None}
        if user is not None:
            status["user"] = user
        body = json.dumps(
            {
                "apiVersion": review.get("apiVersion") or "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "status": status,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
