"""tagpin's configuration: which clusters, which registries, which tags are followed and where they run.

A YAML document validated with pydantic; one module per section (``clusters``, ``registries``,
``targets`` for ``images``, ``rollout``) and the whole ``document``. Errors name the offending
field, e.g. ``images.0.targets.1.cluster: unknown cluster 'prod' (known: dev, stage)``. Where the
text comes from (an SSM parameter, a file) is the adapter ``tagpin.adapters.config_source``.

The public names are importable from this package.
"""

from __future__ import annotations

from tagpin.domain.config.base import (
    CLUSTER_SECRETS,
    GIT_SECRETS,
    NOTIFICATION_SECRETS,
    REGISTRY_SECRETS,
    SIGNING_SECRETS,
    ConfigError,
    NotConfigured,
)
from tagpin.domain.config.clusters import Cluster, EksAccess, KubeconfigAccess, ServiceAccountAccess
from tagpin.domain.config.document import TagpinConfig, parse_config
from tagpin.domain.config.gitops import (
    FileKind,
    GitHost,
    GitHostKind,
    GitOpsSettings,
    WriteBack,
    WriteBackFile,
    WriteMode,
)
from tagpin.domain.config.registries import EcrSettings, Registry, RegistryKind, ecr_host_parts, registry_kind
from tagpin.domain.config.rollout import (
    MaintenanceWindow,
    NotificationSettings,
    RolloutSettings,
    Wave,
    Weekday,
)
from tagpin.domain.config.signatures import PublicKeySource, Signatures, TrustedRootSource, signatures_for
from tagpin.domain.config.targets import FollowedImage, Target
from tagpin.domain.kinds import Kind

__all__ = [
    "CLUSTER_SECRETS",
    "GIT_SECRETS",
    "NOTIFICATION_SECRETS",
    "REGISTRY_SECRETS",
    "SIGNING_SECRETS",
    "Cluster",
    "ConfigError",
    "EcrSettings",
    "EksAccess",
    "FileKind",
    "FollowedImage",
    "GitHost",
    "GitHostKind",
    "GitOpsSettings",
    "Kind",
    "KubeconfigAccess",
    "MaintenanceWindow",
    "NotConfigured",
    "NotificationSettings",
    "PublicKeySource",
    "Registry",
    "RegistryKind",
    "RolloutSettings",
    "ServiceAccountAccess",
    "Signatures",
    "TagpinConfig",
    "Target",
    "TrustedRootSource",
    "Wave",
    "Weekday",
    "WriteBack",
    "WriteBackFile",
    "WriteMode",
    "ecr_host_parts",
    "parse_config",
    "registry_kind",
    "signatures_for",
]
