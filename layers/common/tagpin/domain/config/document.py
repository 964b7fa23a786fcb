"""The whole document: ``TagpinConfig``, its cross-references, and ``parse_config``."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Self

import yaml
from pydantic import Field, ValidationError, model_validator

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config.base import ConfigError
from tagpin.domain.config.clusters import Cluster
from tagpin.domain.config.gitops import GitOpsSettings
from tagpin.domain.config.registries import Registry, RegistryKind, ecr_host_parts
from tagpin.domain.config.rollout import RolloutSettings
from tagpin.domain.config.signatures import STORING
from tagpin.domain.config.targets import FollowedImage
from tagpin.domain.model import Strict


class TagpinConfig(Strict):
    clusters: dict[str, Cluster] = Field(default_factory=dict, description="Clusters by name.")
    registries: dict[str, Registry] = Field(
        default_factory=dict,
        description="Per registry host (`host[:port]`); absent hosts are anonymous HTTPS.",
    )
    images: list[FollowedImage] = Field(
        default_factory=list,
        description="Followed tags with explicit targets (labelled workloads need none).",
    )
    gitops: GitOpsSettings = Field(
        default_factory=GitOpsSettings,
        description="Workloads moved through Git: write-back per image, Git hosts (docs/gitops.md).",
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
    def followed(self) -> dict[FollowedKey, FollowedImage]:
        """Followed images by canonical tagged reference."""
        return {f.image: f for f in self.images}

    def registry(self, host: str) -> Registry:
        return self.registries.get(host, Registry())


def parse_config(text: str | bytes, *, source: str = "configuration", storing: bool = False) -> TagpinConfig:
    """Parse and validate a YAML document; raise ConfigError naming every bad field. ``storing``:
    a document about to be stored (``tagpin config validate``, ``push``) is also refused for a
    value the functions would refuse at its rollout (``signatures.STORING``)."""
    try:
        data: Any = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the document must be a mapping with clusters, registries, images")
    try:
        return TagpinConfig.model_validate(data, context={STORING: storing})
    except ValidationError as exc:
        raise ConfigError(f"{source}: " + _describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where and not message.startswith(where) else message)
    return "; ".join(parts)
