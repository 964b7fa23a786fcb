"""``registries``: per registry host, its kind, credentials and politeness settings."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field

from tagpin.domain.config.base import RegistrySecretName
from tagpin.domain.model import Strict


class RegistryKind(StrEnum):
    """How to authenticate. Every kind but ``ecr`` reads ``credentials_secret`` (optional):

    - ``generic``, ``dockerhub``, ``ghcr``, ``quay``, ``acr``: ``{"username": ..., "password": ...}``
      (``token`` is accepted for ``password``): Docker Hub username + access token, a GitHub user +
      PAT, a Quay robot (``org+name``), an ACR service principal or repository token; without a
      secret access is anonymous (GHCR then gets an anonymous token for public images);
    - ``gar`` (Artifact Registry, GCR): a service-account key (the key JSON itself, or
      ``{"_json_key": <key>}``) sent as ``_json_key``, or ``{"access_token": ...}`` sent as
      ``oauth2accesstoken``;
    - ``ecr``: no secret; a token from ``ecr:GetAuthorizationToken`` (``ecr.region`` or the host's
      region, optionally through ``ecr.role_arn``), cached for most of its 12 hours.
    """

    GENERIC = "generic"
    DOCKERHUB = "dockerhub"
    GHCR = "ghcr"
    QUAY = "quay"
    ACR = "acr"
    GAR = "gar"
    ECR = "ecr"


_ECR_HOST = re.compile(r"^(\d{12})\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")


def registry_kind(host: str) -> RegistryKind:
    """The kind a registry host is, by its name (``generic`` when unknown)."""
    host = host.lower().split(":", 1)[0] if not host.startswith("[") else host
    if host in ("docker.io", "index.docker.io", "registry-1.docker.io"):
        return RegistryKind.DOCKERHUB
    if host == "ghcr.io":
        return RegistryKind.GHCR
    if host == "quay.io":
        return RegistryKind.QUAY
    if host.endswith(".azurecr.io"):
        return RegistryKind.ACR
    if host.endswith("-docker.pkg.dev") or host == "gcr.io" or host.endswith(".gcr.io"):
        return RegistryKind.GAR
    if _ECR_HOST.match(host):
        return RegistryKind.ECR
    return RegistryKind.GENERIC


def ecr_host_parts(host: str) -> tuple[str, str] | None:
    """(account id, region) of an ECR registry host."""
    m = _ECR_HOST.match(host.lower())
    return (m[1], m[2]) if m else None


class EcrSettings(Strict):
    """ECR: region (default: the host's) and an optional role to assume for cross-account access."""

    region: str | None = Field(
        default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="Default: from the ECR host name."
    )
    role_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$",
        description="Role to assume for a registry in another account (list it in `RegistryRoleArns`; "
        "its trust policy must let the functions' roles assume it).",
    )


class Registry(Strict):
    """How to reach one registry host. ``credentials_secret`` names a secret (its
    shape depends on ``kind``, see ``RegistryKind``); without it access is anonymous."""

    insecure: bool = Field(default=False, description="Plain HTTP (local registries only).")
    credentials_secret: RegistrySecretName | None = Field(
        default=None,
        description="Secret named `tagpin/registries/...` with the registry's credentials (the SSM "
        "SecureString `/tagpin/registries/...`, or the Secrets Manager secret with "
        "`SecretStore=secretsmanager`).",
    )
    kind: RegistryKind | None = Field(
        default=None, description="Credential kind; default: worked out from the host."
    )
    ecr: EcrSettings | None = Field(default=None, description="ECR account, region and cross-account role.")
    max_concurrency: int | None = Field(
        default=None, ge=1, le=256, description="Requests in flight to this host."
    )
    head_only: bool | None = Field(
        default=None,
        description="Never GET a manifest; default: only for Docker Hub, where a GET counts as a pull.",
    )
    ignore_attestation_changes: bool = Field(
        default=False, description="An index change that touches only attestation manifests is no change."
    )

    def kind_for(self, host: str) -> RegistryKind:
        return self.kind or registry_kind(host)

    def head_only_for(self, host: str) -> bool:
        return self.head_only if self.head_only is not None else self.kind_for(host) is RegistryKind.DOCKERHUB
