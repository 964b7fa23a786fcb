"""tagpin's configuration: which clusters, which registries, which tags are followed and where they run.

A YAML document validated with pydantic. In AWS it is read from an SSM parameter (cached by
powertools parameters), locally from a file. Errors name the offending field, e.g.
``images.0.targets.1.cluster: unknown cluster 'prod' (known: dev, stage)``.
"""

from __future__ import annotations

import os
import re
from datetime import time
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tagpin.refs import ImageRef, InvalidReference

_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"  # Kubernetes DNS-1123 subdomain
_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # DNS-1123 label (namespaces)
_CONTAINER = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class ConfigError(ValueError):
    """The configuration is invalid; the message names each offending field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EksAccess(_Strict):
    """An EKS cluster: endpoint and CA from eks:DescribeCluster, a token presigned from STS."""

    name: str = Field(min_length=1, max_length=100, description="EKS cluster name.")
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="AWS region of the cluster.")
    role_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$",
        description="Role to assume for a cluster in another account (list it in `ClusterRoleArns`).",
    )


class KubeconfigAccess(_Strict):
    """A kubeconfig held in Secrets Manager (``secret``) or, for local use, a file (``file``)."""

    secret: str | None = Field(
        default=None, description="Secrets Manager secret (under `tagpin/`) holding the kubeconfig."
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


class ServiceAccountAccess(_Strict):
    """Endpoint, CA and a service-account token held in one Secrets Manager secret: JSON
    ``{"endpoint": "https://...", "ca.crt": "<PEM>", "token": "<token>"}`` (the keys of a
    Kubernetes service-account token Secret, plus the endpoint)."""

    secret: str = Field(
        min_length=1, description="Secrets Manager secret (under `tagpin/`) holding the JSON."
    )


class Cluster(_Strict):
    eks: EksAccess | None = Field(default=None, description="Reach an EKS cluster with IAM.")
    kubeconfig: KubeconfigAccess | None = Field(
        default=None, description="Reach a cluster through a kubeconfig."
    )
    service_account: ServiceAccountAccess | None = Field(
        default=None, description="Reach a cluster with endpoint, CA and token from one secret."
    )

    @model_validator(mode="after")
    def _one_access(self) -> Self:
        given = [a for a in (self.eks, self.kubeconfig, self.service_account) if a is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'eks', 'kubeconfig' or 'service_account'")
        return self


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


class EcrSettings(_Strict):
    """ECR: region (default: the host's) and an optional role to assume for cross-account access."""

    region: str | None = Field(
        default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="Default: from the ECR host name."
    )
    role_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$",
        description="Role (named `tagpin-registry-*`) to assume for a registry in another account.",
    )


class Registry(_Strict):
    """How to reach one registry host. ``credentials_secret`` names a Secrets Manager secret (its
    shape depends on ``kind``, see ``RegistryKind``); without it access is anonymous."""

    insecure: bool = Field(default=False, description="Plain HTTP (local registries only).")
    credentials_secret: str | None = Field(
        default=None, description="Secrets Manager secret (under `tagpin/`) with this registry's credentials."
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


class Kind(StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"
    DAEMONSET = "DaemonSet"
    CRONJOB = "CronJob"


class Target(_Strict):
    """A container of a workload that runs the followed tag."""

    cluster: str = Field(description="A name under `clusters`.")
    namespace: Annotated[str, Field(pattern=_LABEL, max_length=63)] = Field(
        default="default", description="Namespace of the workload."
    )
    kind: Kind = Field(default=Kind.DEPLOYMENT, description="Workload kind.")
    name: Annotated[str, Field(pattern=_NAME, max_length=253)] = Field(description="Workload name.")
    container: Annotated[str, Field(pattern=_CONTAINER, max_length=63)] = Field(
        description="Container (or init container) whose image follows the tag."
    )

    @property
    def id(self) -> str:
        return f"{self.cluster}/{self.namespace}/{self.kind.value}/{self.name}/{self.container}"


class FollowedImage(_Strict):
    image: str = Field(
        description="The followed tag, e.g. `registry.example.com/team/web:stable` (no digest)."
    )
    targets: list[Target] = Field(min_length=1, description="Where it runs.")

    @field_validator("image")
    @classmethod
    def _tagged_reference(cls, value: str) -> str:
        try:
            ref = ImageRef.parse(value)
        except InvalidReference as exc:
            raise ValueError(str(exc)) from None
        if ref.digest is not None:
            raise ValueError(f"{value!r} is pinned to a digest; follow a tag (e.g. 'repo:stable')")
        return ref.tagged

    @property
    def ref(self) -> ImageRef:
        return ImageRef.parse(self.image)


class Wave(_Strict):
    """A stage of a promotion: the targets in these clusters (optionally only these namespaces)."""

    name: str = Field(pattern=_LABEL, max_length=63, description="Shown in history and notifications.")
    clusters: list[str] = Field(min_length=1, description="Clusters of this wave (names under `clusters`).")
    namespaces: list[Annotated[str, Field(pattern=_LABEL, max_length=63)]] = Field(
        default_factory=list,
        description="Only targets in these namespaces belong to this wave; empty: every namespace.",
    )
    soak_seconds: int | None = Field(
        default=None,
        ge=0,
        le=7 * 86400,
        description="Time to wait after every target of this wave is verified before the next wave "
        "starts; default `rollout.soak_seconds`.",
    )

    def matches(self, cluster: str, namespace: str) -> bool:
        return cluster in self.clusters and (not self.namespaces or namespace in self.namespaces)


class Weekday(StrEnum):
    MON = "mon"
    TUE = "tue"
    WED = "wed"
    THU = "thu"
    FRI = "fri"
    SAT = "sat"
    SUN = "sun"


class MaintenanceWindow(_Strict):
    """When rollouts may START on the targets it covers (verification and rollback always run).

    A target covered by one or more windows starts a rollout only inside one of them; a rollout
    that arrives outside is deferred (recorded ``pending``) and started when a window opens. A
    window whose ``end`` is before its ``start`` runs over midnight.
    """

    clusters: list[str] = Field(
        default_factory=list, description="Clusters it covers; empty: every cluster (see `targets`)."
    )
    targets: list[str] = Field(
        default_factory=list,
        description="Target ids it covers (`cluster/namespace/Kind/name/container`, shell patterns "
        "allowed, e.g. `prod/shop/*`); empty: every target of `clusters`.",
    )
    days: list[Weekday] = Field(
        default_factory=lambda: list(Weekday), description="Days on which the window opens."
    )
    start: time = Field(description="Opening time, `HH:MM` or `HH:MM:SS`, in `timezone`.")
    end: time = Field(description="Closing time; before `start` means the next day.")
    timezone: str = Field(default="UTC", description="IANA time zone name, e.g. `Europe/Paris`.")

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}") from None
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if self.start == self.end:
            raise ValueError("start and end are equal: the window would never open")
        return self


class NotificationSettings(_Strict):
    """Where rollout events go: the stack's SNS topic, and optionally chat and HTTP webhooks."""

    sns: bool = Field(default=True, description="Publish to the stack's SNS topic (`RolloutTopic`).")
    webhooks_secret: str | None = Field(
        default=None,
        pattern=r"^tagpin/.+$",
        description="Secrets Manager secret (under `tagpin/`) with webhook URLs: JSON "
        '`{"slack": "https://hooks.slack.com/...", "teams": "https://...", "http": "https://..."}`, '
        "each optional.",
    )


class RolloutSettings(_Strict):
    """How a new digest rolls out: verification, rollback, waves and guards."""

    verify: bool = Field(
        default=True,
        description="Follow every patch until the workload has rolled out (or failed) before "
        "calling the target verified.",
    )
    verify_interval_seconds: int = Field(
        default=20, ge=1, le=900, description="Delay between two checks of a rollout in progress."
    )
    verify_timeout_seconds: int = Field(
        default=900,
        ge=1,
        le=86400,
        description="A rollout not complete this long after the patch has failed (besides "
        "`ProgressDeadlineExceeded`, which fails it at once).",
    )
    rollback: bool = Field(
        default=True,
        description="On failure, restore the previous image of every target of that digest; either "
        "way the digest is marked bad for the tag until the tag moves to another digest.",
    )
    waves: list[Wave] = Field(
        default_factory=list,
        description="Ordered waves. A new digest goes to the first; the next starts once every "
        "target of the previous one is verified and its soak time has passed. Targets in no wave "
        "form an implicit last wave. Empty: one wave with every target.",
    )
    soak_seconds: int = Field(
        default=0, ge=0, le=7 * 86400, description="Default soak time after a verified wave."
    )
    maintenance_windows: list[MaintenanceWindow] = Field(
        default_factory=list, description="When rollouts may start, per cluster or target."
    )
    max_concurrent_per_cluster: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="Rollouts (patched, not yet verified) at a time in one cluster, over every "
        "image; more are deferred. Unset: no limit.",
    )
    dry_run: bool = Field(
        default=False,
        description="Record the plan (what would be patched, in which wave) and patch nothing.",
    )
    history_retention_days: int = Field(
        default=90, ge=1, le=3650, description="Audit history items expire (DynamoDB TTL) after this."
    )
    notifications: NotificationSettings = Field(
        default_factory=NotificationSettings, description="Notifications on rollout events."
    )

    def soak_after(self, wave: Wave | None) -> int:
        return self.soak_seconds if wave is None or wave.soak_seconds is None else wave.soak_seconds


class TagpinConfig(_Strict):
    clusters: dict[str, Cluster] = Field(default_factory=dict, description="Clusters by name.")
    registries: dict[str, Registry] = Field(
        default_factory=dict,
        description="Per registry host (`host[:port]`); absent hosts are anonymous HTTPS.",
    )
    images: list[FollowedImage] = Field(
        default_factory=list,
        description="Followed tags with explicit targets (labelled workloads need none).",
    )
    rollout: RolloutSettings = Field(
        default_factory=RolloutSettings,
        description="Verification, rollback, waves, maintenance windows, dry-run, notifications.",
    )

    @model_validator(mode="after")
    def _references(self) -> Self:
        self._rollout_references()
        for host, registry in self.registries.items():
            if (
                registry.kind_for(host) is RegistryKind.ECR
                and not (registry.ecr and registry.ecr.region)
                and ecr_host_parts(host) is None
            ):
                raise ValueError(
                    f"registries.{host}.ecr.region: required when the host is not an ECR host name"
                )
        seen: set[str] = set()
        for i, followed in enumerate(self.images):
            if followed.image in seen:
                raise ValueError(f"images.{i}.image: {followed.image} is listed twice")
            seen.add(followed.image)
            for j, target in enumerate(followed.targets):
                if target.cluster not in self.clusters:
                    known = ", ".join(sorted(self.clusters)) or "none"
                    raise ValueError(
                        f"images.{i}.targets.{j}.cluster: unknown cluster {target.cluster!r} (known: {known})"
                    )
        return self

    def _rollout_references(self) -> None:
        known = ", ".join(sorted(self.clusters)) or "none"
        names: set[str] = set()
        for i, wave in enumerate(self.rollout.waves):
            if wave.name in names:
                raise ValueError(f"rollout.waves.{i}.name: wave {wave.name!r} is listed twice")
            names.add(wave.name)
            for j, cluster in enumerate(wave.clusters):
                if cluster not in self.clusters:
                    raise ValueError(
                        f"rollout.waves.{i}.clusters.{j}: unknown cluster {cluster!r} (known: {known})"
                    )
        for i, window in enumerate(self.rollout.maintenance_windows):
            for j, cluster in enumerate(window.clusters):
                if cluster not in self.clusters:
                    raise ValueError(
                        f"rollout.maintenance_windows.{i}.clusters.{j}: unknown cluster {cluster!r} "
                        f"(known: {known})"
                    )

    @cached_property
    def followed(self) -> dict[str, FollowedImage]:
        """Followed images by canonical tagged reference."""
        return {f.image: f for f in self.images}

    def registry(self, host: str) -> Registry:
        return self.registries.get(host, Registry())


def parse_config(text: str | bytes, *, source: str = "configuration") -> TagpinConfig:
    """Parse and validate a YAML document; raise ConfigError naming every bad field."""
    try:
        data: Any = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the document must be a mapping with clusters, registries, images")
    try:
        return TagpinConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: " + _describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where and not message.startswith(where) else message)
    return "; ".join(parts)


class ConfigLoader:
    """Loads the configuration from an SSM parameter (cached ``max_age`` seconds) or a file.

    The parsed result is reused while the raw text is unchanged, so warm invocations pay nothing.
    """

    def __init__(self, *, parameter: str | None = None, file: str | None = None, max_age: int = 60) -> None:
        if (parameter is None) == (file is None):
            raise ConfigError("set exactly one of TAGPIN_CONFIG_PARAMETER or TAGPIN_CONFIG_FILE")
        self._parameter = parameter
        self._file = file
        self._max_age = max_age
        self._cached: tuple[str, TagpinConfig] | None = None

    def _text(self) -> str:
        if self._file is not None:
            return Path(self._file).read_text(encoding="utf-8")
        from aws_lambda_powertools.utilities import parameters

        value = parameters.get_parameter(self._parameter or "", decrypt=True, max_age=self._max_age)
        return value if isinstance(value, str) else str(value)

    def load(self) -> TagpinConfig:
        text = self._text()
        if self._cached is not None and self._cached[0] == text:
            return self._cached[1]
        config = parse_config(text, source=self._parameter or self._file or "configuration")
        self._cached = (text, config)
        return config

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ConfigLoader:
        env = dict(os.environ if env is None else env)
        return cls(
            parameter=env.get("TAGPIN_CONFIG_PARAMETER") or None, file=env.get("TAGPIN_CONFIG_FILE") or None
        )
