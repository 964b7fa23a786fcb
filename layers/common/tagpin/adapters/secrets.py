"""Secrets by name, from the store the stack chose (``TAGPIN_SECRET_STORE``, template parameter
``SecretStore``), read through powertools parameters and cached ``max_age`` seconds per container.

One name per secret, whatever the store: the configuration names ``tagpin/clusters/prod``.

- ``ssm`` (the default): the SSM parameter ``/tagpin/clusters/prod`` (``parameter_name``), a
  SecureString, read with ``GetParameter`` and ``WithDecryption``. Standard tier parameters cost
  nothing and their standard throughput is free; a value holds up to 4 KB (8 KB in the Advanced
  tier, $0.05 a month). Encrypted with the AWS-managed key ``alias/aws/ssm`` unless the operator
  chose a key: that key's policy lets principals of the account decrypt through SSM, so a role
  needs only ``ssm:GetParameter`` (a customer-managed key needs ``kms:Decrypt``: ``KmsKeyArn``).
- ``secretsmanager``: the secret ``tagpin/clusters/prod``, read with ``GetSecretValue``. $0.40 a
  month per secret: for operators who need rotation or values over 8 KB.

Callers get text (``text``) or a JSON object (``json``) and never learn which store answered. A
secret that does not exist raises ``SecretNotFound`` in either store. Secrets Manager's
AccessDenied raises ``SecretDenied``, a ``SecretNotFound``: it is also that store's answer for a
missing secret the caller is granted by ARN (the webhook's role), so a caller that only needs "not
there for me" (the webhook's 503) catches ``SecretNotFound``, and one that must tell a person what
to do (``tagpin doctor``) tells the two apart. Other failures propagate as powertools raises them
(``GetParameterError``, with the service's message: names, never values). Nothing here logs a
secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tagpin.settings import SecretStore

# The service's error codes for "no such secret", as powertools quotes them in GetParameterError.
_NOT_FOUND = ("ParameterNotFound", "ResourceNotFoundException")
# Secrets Manager's answer to a role granted a secret by its ARN (``secret:NAME-??????``: the 6
# characters it appends) when that secret does not exist: the name's ARN has no such suffix, so
# IAM denies before Secrets Manager could say ResourceNotFound.
_DENIED = "AccessDeniedException"


class SecretNotFound(LookupError):
    """The secret does not exist in the store (the message names it as that store does)."""


class SecretDenied(SecretNotFound):
    """Secrets Manager refused the read (AccessDenied): the caller may not read the secret (its
    policy, or the KMS key's), or, for a caller granted the secret by its ARN, it does not exist."""


def parameter_name(name: str) -> str:
    """The SSM parameter holding the secret ``name``: ``/`` + the name (``/tagpin/clusters/prod``)."""
    return name if name.startswith("/") else "/" + name


def stored_name(store: SecretStore, name: str) -> str:
    """The secret's name in ``store``: the SSM parameter name, or the Secrets Manager secret's."""
    return parameter_name(name) if store is SecretStore.SSM else name


@dataclass(frozen=True)
class Secrets:
    """Reads secrets from one store (the composition root builds one per container)."""

    store: SecretStore
    max_age: int = 300

    def where(self, name: str) -> str:
        """Where ``name`` lives, for messages: ``SSM parameter /tagpin/x`` or ``secret tagpin/x``."""
        if self.store is SecretStore.SSM:
            return f"SSM parameter {parameter_name(name)}"
        return f"Secrets Manager secret {name}"

    def text(self, name: str) -> str:
        value = self._get(name, None)
        return value.decode() if isinstance(value, bytes) else str(value)

    def json(self, name: str) -> dict[str, Any]:
        value = self._get(name, "json")
        if not isinstance(value, dict):
            raise ValueError(f"the {self.where(name)} is not a JSON object")
        return value

    def _get(self, name: str, transform: Any) -> Any:
        from aws_lambda_powertools.utilities import parameters

        try:
            if self.store is SecretStore.SSM:
                return parameters.get_parameter(
                    parameter_name(name), decrypt=True, transform=transform, max_age=self.max_age
                )
            return parameters.get_secret(name, transform=transform, max_age=self.max_age)
        except parameters.GetParameterError as exc:
            if any(code in str(exc) for code in _NOT_FOUND):
                raise SecretNotFound(f"the {self.where(name)} does not exist") from None
            if self.store is SecretStore.SECRETS_MANAGER and _DENIED in str(exc):
                raise SecretDenied(
                    f"the {self.where(name)} is not readable: AccessDenied (no permission to read it or "
                    "to decrypt it with its KMS key; or, for a caller granted the secret by its ARN, it "
                    "does not exist)"
                ) from None
            raise
