"""``clusters``: how tagpin reaches each cluster (EKS, a kubeconfig, or a service-account token)."""

from __future__ import annotations

from typing import Self

from pydantic import Field, field_validator, model_validator

from tagpin.domain.config.base import ClusterSecretName
from tagpin.domain.model import Strict
from tagpin.domain.platforms import Platform


class EksAccess(Strict):
    """An EKS cluster: endpoint and CA from eks:DescribeCluster, a token presigned from STS."""

    name: str = Field(min_length=1, max_length=100, description="EKS cluster name.")
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="AWS region of the cluster.")
    role_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$",
        description="Role to assume for a cluster in another account (list it in `ClusterRoleArns`).",
    )


class KubeconfigAccess(Strict):
    """A kubeconfig held in a secret (``secret``) or, for local use, a file (``file``)."""

    secret: ClusterSecretName | None = Field(
        default=None,
        description="Secret named `tagpin/clusters/...` holding the kubeconfig (the SSM SecureString "
        "`/tagpin/clusters/...`, or the Secrets Manager secret with `SecretStore=secretsmanager`).",
    )
    file: str | None = Field(default=None, description="Path of a kubeconfig file (local use).")
    context: str | None = Field(
        default=None, description="Context to use; default: the kubeconfig's current context."
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.secret is None) == (self.file is None):
            raise ValueError("give exactly one of 'secret' or 'file'")
        return self


class ServiceAccountAccess(Strict):
    """Endpoint, CA and a service-account token held in one secret: JSON
    ``{"endpoint": "https://...", "ca.crt": "<PEM>", "token": "<token>"}`` (the keys of a
    Kubernetes service-account token Secret, plus the endpoint)."""

    secret: ClusterSecretName = Field(
        description="Secret named `tagpin/clusters/...` holding the JSON (the SSM SecureString "
        "`/tagpin/clusters/...`, or the Secrets Manager secret with `SecretStore=secretsmanager`)."
    )


class Cluster(Strict):
    eks: EksAccess | None = Field(default=None, description="Reach an EKS cluster with IAM.")
    kubeconfig: KubeconfigAccess | None = Field(
        default=None, description="Reach a cluster through a kubeconfig."
    )
    service_account: ServiceAccountAccess | None = Field(
        default=None, description="Reach a cluster with endpoint, CA and token from one secret."
    )
    platforms: list[str] = Field(
        default_factory=list,
        description="The platforms the cluster's nodes run (`linux/amd64`, `linux/arm64`), when tagpin's "
        "role may not list its nodes or none is listed: an image must provide each of them to be rolled "
        "there (docs/trust.md). Listed nodes take precedence.",
    )

    @field_validator("platforms")
    @classmethod
    def _platforms(cls, value: list[str]) -> list[str]:
        return [str(Platform.parse(p)) for p in value]

    @property
    def platform_set(self) -> frozenset[Platform]:
        return frozenset(Platform.parse(p) for p in self.platforms)

    @model_validator(mode="after")
    def _one_access(self) -> Self:
        given = [a for a in (self.eks, self.kubeconfig, self.service_account) if a is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'eks', 'kubeconfig' or 'service_account'")
        return self
