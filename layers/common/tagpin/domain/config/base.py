"""What every configuration model shares: strict validation and the Kubernetes name patterns."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

NAME_PATTERN = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"  # Kubernetes DNS-1123 subdomain
)
LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # DNS-1123 label (namespaces)
CONTAINER_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class ConfigError(ValueError):
    """The configuration is invalid; the message names each offending field."""


class NotConfigured(ConfigError):
    """The configuration (or a secret every request needs) does not exist yet: a stack deployed
    and not configured. Functions wait quietly instead of failing; the message says what to do.

    The message may be answered to anyone (the webhook's 503, before authentication); ``reason``,
    for the operator's log, may say more (which secret, which permission): the message by default.
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


SECRET_PREFIX = "tagpin/"  # noqa: S105 (a name prefix, not a secret)
# Each kind of secret the configuration names lives under its own prefix, so that template.yaml
# grants each function only the kinds it reads (ssm:GetParameter on parameter/<prefix>*, or
# secretsmanager:GetSecretValue on secret:<prefix>*, as the stack's SecretStore says):
REGISTRY_SECRETS = SECRET_PREFIX + "registries/"  # the poller, the webhook, the reconciler
CLUSTER_SECRETS = SECRET_PREFIX + "clusters/"  # the consumer, the verifier, the reconciler
NOTIFICATION_SECRETS = SECRET_PREFIX + "notifications/"  # the consumer, the reconciler (holds)
SIGNING_SECRETS = SECRET_PREFIX + "signing/"  # the consumer: public keys, Sigstore trusted roots
# A name valid in both stores, so a configuration works with either: SSM parameter names allow
# letters, digits and _.-/ (Secrets Manager also allows +=@, SSM does not). Written without the
# leading "/" of the SSM parameter (tagpin/clusters/prod is the parameter /tagpin/clusters/prod).
SECRET_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*")
SECRET_NAME_MAX = 512  # Secrets Manager's limit; SSM allows 1011 characters for a whole name


def _under(prefix: str, what: str, readers: str) -> AfterValidator:
    def check(name: str) -> str:
        if not name.startswith(prefix) or len(name) == len(prefix):
            raise ValueError(
                f"{name!r}: {what} must be a secret named {prefix}<name>: only {readers} may read "
                f"them (template.yaml grants them alone the SSM parameters /{prefix}*, or the Secrets "
                f"Manager secrets {prefix}*; docs/deploying.md)"
            )
        if len(name) > SECRET_NAME_MAX or not SECRET_NAME_PATTERN.fullmatch(name):
            raise ValueError(
                f"{name!r}: a secret name has letters, digits and _ . - between single slashes, at most "
                f"{SECRET_NAME_MAX} characters (valid as an SSM parameter and as a Secrets Manager secret)"
            )
        return name

    return AfterValidator(check)


# The name of a secret the configuration points to, by what it holds: the SSM SecureString
# parameter "/" + name, or the Secrets Manager secret name (template parameter SecretStore).
RegistrySecretName = Annotated[
    str, _under(REGISTRY_SECRETS, "registry credentials", "the functions that resolve tags")
]
ClusterSecretName = Annotated[
    str, _under(CLUSTER_SECRETS, "cluster credentials", "the functions that reach clusters")
]
NotificationSecretName = Annotated[
    str, _under(NOTIFICATION_SECRETS, "notification webhooks", "the functions that notify")
]
SigningSecretName = Annotated[
    str, _under(SIGNING_SECRETS, "signature keys and trusted roots", "the function that rolls out")
]
