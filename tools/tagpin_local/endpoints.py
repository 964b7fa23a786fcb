"""The endpoints of a local stack, as `tagpin local` writes them to its endpoints file (readable by its
owner only) and prints them. The secrets among them (the console's sign-in token, the local
cluster's kubeconfig with its bearer token) are ``SecretStr`` values: shown as ``**********`` in a
repr or a message, left out of what is printed (``public``), revealed only in the file."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr

SECRETS = frozenset({"console_token", "kubeconfig"})  # the fields of LocalEndpoints that are secrets


class LocalEndpoints(BaseModel):
    """The endpoints file ``tagpin local`` writes (``LocalStack.endpoints()`` and the local
    cluster's kubeconfig): the secrets are ``SecretStr``; a key not named here is dropped (a
    secret added to the file later is never printed by mistake)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    state_table: str
    queue_url: str
    dead_letter_queue_url: str
    config_parameter: str
    aws_endpoint: str
    registry_url: str = ""
    kubernetes_url: str = ""
    notification_topic_arn: str = ""
    webhook_url: str = ""  # <base>/{source}
    console_url: str = ""
    alarm_topic_arn: str = ""
    webhook_secret: str = ""  # the secret's name
    secret_store: str = "ssm"  # noqa: S105 (a store, not a secret)
    console_token: SecretStr | None = None  # the console's sign-in token
    kubeconfig: SecretStr | None = None  # the local cluster's, with its bearer token

    def public(self) -> dict[str, Any]:
        """What may be printed: every endpoint but the secrets (those stay in the file)."""
        return self.model_dump(exclude=set(SECRETS))

    def revealed(self) -> dict[str, Any]:
        """Everything, the secrets in clear: for the file only (readable by its owner)."""
        secrets = {
            name: value.get_secret_value()
            for name in sorted(SECRETS)
            if (value := getattr(self, name)) is not None
        }
        return self.public() | secrets
