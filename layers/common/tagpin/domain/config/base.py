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


def _under_prefix(name: str) -> str:
    if not name.startswith(SECRET_PREFIX) or len(name) == len(SECRET_PREFIX):
        raise ValueError(
            f"{name!r} is not a secret under {SECRET_PREFIX}: the functions may read only secrets "
            f"named {SECRET_PREFIX}... (the template's IAM policies name that prefix)"
        )
    return name


# The name of a Secrets Manager secret the configuration points to.
SecretName = Annotated[str, AfterValidator(_under_prefix)]
