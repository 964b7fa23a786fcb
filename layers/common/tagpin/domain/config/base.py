"""What every configuration model shares: strict validation and the Kubernetes name patterns."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

NAME_PATTERN = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"  # Kubernetes DNS-1123 subdomain
)
LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # DNS-1123 label (namespaces)
CONTAINER_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class ConfigError(ValueError):
    """The configuration is invalid; the message names each offending field."""


class NotConfigured(ConfigError):
    """The configuration (or a secret every request needs) does not exist yet: a stack deployed
    and not configured. Functions wait quietly instead of failing; the message says what to do."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


SECRET_PREFIX = "tagpin/"  # noqa: S105 (a name prefix, not a secret)
# Each kind of secret the configuration names lives under its own prefix, so that template.yaml
# grants each function only the kinds it reads (secretsmanager:GetSecretValue on <prefix>*):
REGISTRY_SECRETS = SECRET_PREFIX + "registries/"  # the poller, the webhook, the reconciler
CLUSTER_SECRETS = SECRET_PREFIX + "clusters/"  # the consumer, the verifier, the reconciler
NOTIFICATION_SECRETS = SECRET_PREFIX + "notifications/"  # the consumer, the verifier


def _under(prefix: str, what: str, readers: str) -> AfterValidator:
    def check(name: str) -> str:
        if not name.startswith(prefix) or len(name) == len(prefix):
            raise ValueError(
                f"{name!r}: {what} must be a secret named {prefix}<name>: only {readers} may read "
                f"them (template.yaml grants secretsmanager:GetSecretValue on {prefix}* to those "
                "functions alone; docs/deploying.md)"
            )
        return name

    return AfterValidator(check)


# The name of a Secrets Manager secret the configuration points to, by what it holds.
RegistrySecretName = Annotated[
    str, _under(REGISTRY_SECRETS, "registry credentials", "the functions that resolve tags")
]
ClusterSecretName = Annotated[
    str, _under(CLUSTER_SECRETS, "cluster credentials", "the functions that reach clusters")
]
NotificationSecretName = Annotated[
    str, _under(NOTIFICATION_SECRETS, "notification webhooks", "the functions that notify")
]
