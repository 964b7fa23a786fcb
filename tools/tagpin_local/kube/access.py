"""Who reaches a local cluster and how: identities, kubeconfigs, API clients and kubectl."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from .pki import KeyPair


@dataclass(frozen=True)
class Identity:
    """Whom a client authenticates as: a client certificate or a bearer token."""

    name: str  # the kubeconfig's user and context name
    user: str  # the user name the API server sees
    cert: KeyPair | None = None
    token: str | None = None


def service_account(api: client.ApiClient, namespace: str, name: str, seconds: int = 86400) -> Identity:
    """The ServiceAccount (created with its namespace if missing) and a TokenRequest token for it."""
    core = client.CoreV1Api(api)
    for create in (
        lambda: core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))),
        lambda: core.create_namespaced_service_account(
            namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
        ),
    ):
        try:
            create()
        except client.ApiException as e:
            if e.status != 409:
                raise
    # no audiences: the API server's own (its issuer)
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
    )
    status = core.create_namespaced_service_account_token(name, namespace, request).status
    assert status is not None and status.token
    return Identity(f"{namespace}-{name}", f"system:serviceaccount:{namespace}:{name}", token=status.token)


class KubectlFailed(subprocess.CalledProcessError):
    """kubectl exited non-zero; the message carries what it printed on stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.stderr}"


def kubeconfig(
    who: Identity, server: str, ca_pem: bytes, namespace: str = "default", context: str | None = None
) -> dict[str, Any]:
    """A kubeconfig for ``who`` at ``server``; its cluster, user and context are named ``context``
    (the identity's name by default)."""
    name = context or who.name
    user: dict[str, str] = {"token": who.token} if who.token else {}
    if who.cert is not None:
        user["client-certificate-data"] = base64.b64encode(who.cert.cert_pem).decode()
        user["client-key-data"] = base64.b64encode(who.cert.key_pem).decode()
    cluster = {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
    }


def api_client(who: Identity, server: str, ca_file: Path) -> client.ApiClient:
    """An API client of the official library for ``who``."""
    config = client.Configuration(host=server)
    config.ssl_ca_cert = str(ca_file)
    if who.cert is not None:
        config.cert_file, config.key_file = str(who.cert.cert), str(who.cert.key)
    if who.token:
        config.api_key = {"authorization": f"Bearer {who.token}"}
    return client.ApiClient(config)


def kubectl(
    args: Sequence[str], env: dict[str, str], input: str | None, check: bool
) -> subprocess.CompletedProcess[str]:
    """kubectl as a process (stdout, stderr and the exit code kept); :class:`KubectlFailed` on a
    non-zero exit when ``check``."""
    done = subprocess.run(
        ["kubectl", *args], input=input, capture_output=True, text=True, env=env, timeout=300, check=False
    )
    if check and done.returncode != 0:
        raise KubectlFailed(done.returncode, done.args, done.stdout, done.stderr)
    return done
