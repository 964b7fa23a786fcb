"""Every ``TAGPIN_*`` environment variable, read in one place and validated at cold start.

The template sets them per function (``NEEDS`` says which function needs which; the template test
checks the template against it); the local stack sets them for its in-process functions.
``docs/configuration.md`` lists them, generated from this model (``make docs``).

A handler calls ``Settings.for_function(name)`` when its module loads: a missing or malformed
variable stops the cold start with one message naming the variable, instead of an error deep in
the first request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

# pydantic looks for plugins (the ``pydantic`` entry point group) when it builds its first model, by
# reading the metadata of every distribution on the path: about 10 ms of each function's cold start
# (the layers hold some 30 distributions; ``make bench-coldstart``), for plugins tagpin has none of.
# Its documented switch turns the search off; read at that first build (the settings model, below),
# so set before it. An operator's own value stays.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

PREFIX = "TAGPIN_"
Function = Literal["poller", "webhook", "consumer", "reconciler", "console", "writeback"]
CONFIG = "config"  # one of config_parameter or config_file


class ConsoleAuth(StrEnum):
    """How the console knows who is signed in (``tagpin.adapters.web.auth``)."""

    # On AWS: the HTTP API's JWT authorizer validated the request's bearer token before the
    # function runs; the function reads the claims it passes (requestContext.authorizer.jwt).
    JWT = "jwt"
    # The local stack: a sign-in token (TAGPIN_CONSOLE_TOKEN) exchanged for an HMAC-signed session
    # cookie (TAGPIN_CONSOLE_SESSION_KEY).
    TOKEN = "token"  # noqa: S105 (a mode, not a secret)


class SecretStore(StrEnum):
    """Where the secrets live (template parameter ``SecretStore``). One name per secret either way:
    the configuration names ``tagpin/clusters/prod``; in SSM that is the SecureString parameter
    ``/tagpin/clusters/prod``, in Secrets Manager the secret ``tagpin/clusters/prod``."""

    # SSM Parameter Store SecureString, Standard tier: no monthly charge, standard throughput free
    # (a Secrets Manager secret costs $0.40 a month). The default.
    SSM = "ssm"
    # Secrets Manager: for rotation, cross-account resource policies, values over 4 KB (8 KB with
    # SSM's Advanced tier). $0.40 per secret a month, $0.05 per 10,000 reads.
    SECRETS_MANAGER = "secretsmanager"


# What each function reads. The template test checks each function's Environment against it.
NEEDS: dict[str, tuple[str, ...]] = {
    "poller": (CONFIG, "state_table", "queue_url", "secret_store", "poll_parts"),
    # The webhook queues what it is sent (notifications_queue_url) and checks it from there.
    "webhook": (
        CONFIG,
        "state_table",
        "queue_url",
        "notifications_queue_url",
        "webhook_secret",
        "secret_store",
    ),
    "consumer": (
        CONFIG,
        "state_table",
        "idempotency_table",
        "queue_url",
        "notify_topic_arn",
        "secret_store",
        "writeback_queue_url",
    ),
    "reconciler": (
        CONFIG,
        "state_table",
        "queue_url",
        "reconcile_resolves",
        "notify_topic_arn",
        "secret_store",
    ),
    # The console signs people in through the HTTP API's JWT authorizer; it reads the notification
    # secret to announce a person's decision on an approval and to verify Slack's button clicks
    # (slack_signing_secret, POST /slack/actions).
    "console": (
        CONFIG,
        "state_table",
        "queue_url",
        "dead_letter_queue_url",
        "notify_topic_arn",
        "secret_store",
    ),
    # Writes owned targets' references to Git (docs/gitops.md): reads the write-back queue, records
    # the commits in the state table and sends their verifications to the changes queue.
    "writeback": (CONFIG, "state_table", "queue_url", "writeback_queue_url", "secret_store"),
}
# Read when set; absent means "not used" (the topic) or the field's default (reconcile_resolves,
# secret_store, poll_parts); without the write-back queue the consumer writes nothing to Git (an
# owned target is refused, as before write-back existed), the write-back function needs it.
# Every function reads secrets of some kind: each gets TAGPIN_SECRET_STORE.
OPTIONAL = frozenset(
    {"notify_topic_arn", "reconcile_resolves", "secret_store", "poll_parts", "writeback_queue_url"}
)
REQUIRED_HERE = frozenset({("writeback", "writeback_queue_url")})  # optional elsewhere, not here
# Variables the template does not set, and who reads them: the registry client's limits (with a
# default) in the functions that resolve tags; the console's local sign-in (the local stack sets them).
TUNING: dict[str, tuple[str, ...]] = {
    "poll_concurrency": ("poller", "webhook", "reconciler"),
    "registry_concurrency": ("poller", "webhook", "reconciler"),
    "console_auth": ("console",),
    "console_token": ("console",),
    "console_session_key": ("console",),
}


class SettingsError(RuntimeError):
    """An environment variable is missing or malformed; the message names it."""


def variable(field: str) -> str:
    return PREFIX + field.upper()


class Settings(BaseModel):
    """The ``TAGPIN_*`` variables (``from_env``), one field per variable without the prefix.

    A plain model read by ``from_env``, not pydantic-settings' ``BaseSettings``: importing that
    package (its AWS, Azure, GCP and dotenv sources) cost every function about a tenth of its cold
    start, to read a dozen flat variables. ``from_env`` reads them as it did: the prefix in any
    case, an empty variable as unset, the text validated in pydantic's lax mode."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    config_parameter: str | None = Field(
        default=None, min_length=1, description="SSM parameter holding the YAML configuration (on AWS)."
    )
    config_file: str | None = Field(
        default=None, min_length=1, description="A file holding the YAML configuration instead (local use)."
    )
    state_table: str | None = Field(
        default=None,
        min_length=3,
        description="DynamoDB table of tags, targets, promotions, index and history.",
    )
    idempotency_table: str | None = Field(
        default=None, min_length=3, description="DynamoDB table of the consumer's idempotency records."
    )
    queue_url: str | None = Field(
        default=None,
        min_length=1,
        description="URL of the changes queue (SQS FIFO): changes and delayed rollout verifications.",
    )
    notifications_queue_url: str | None = Field(
        default=None,
        min_length=1,
        description="URL of the notifications queue (SQS standard): the webhook queues the registry "
        "notifications it accepted there and answers; the same function checks them from it.",
    )
    writeback_queue_url: str | None = Field(
        default=None,
        min_length=1,
        description="URL of the write-back queue (SQS FIFO, one message group per Git repository): "
        "the consumer sends the references of targets Argo CD or Flux owns there, the write-back "
        "function commits them (docs/gitops.md).",
    )
    webhook_secret: str | None = Field(
        default=None,
        min_length=1,
        description='Secret with the webhook credentials: `{"<source>": {...}}`, in the secret store '
        "(`TAGPIN_SECRET_STORE`): the SecureString parameter `/` + this name, or the Secrets Manager "
        "secret of this name.",
    )
    secret_store: SecretStore = Field(
        default=SecretStore.SSM,
        description="Where every secret is read (template parameter `SecretStore`): `ssm`, SSM "
        "Parameter Store SecureString parameters named `/` + the secret's name (`/tagpin/clusters/prod`; "
        "Standard tier, free), or `secretsmanager`, Secrets Manager secrets named as written "
        "(`tagpin/clusters/prod`; $0.40 a month each, for rotation).",
    )
    dead_letter_queue_url: str | None = Field(
        default=None,
        min_length=1,
        description="URL of the changes queue's dead-letter queue: the console lists it and redrives it.",
    )
    console_auth: ConsoleAuth = Field(
        default=ConsoleAuth.JWT,
        description="How the console knows who is signed in: `jwt`, the claims of the HTTP API's JWT "
        "authorizer (on AWS: the template sets nothing, this is the default); `token`, a sign-in token "
        "exchanged for a signed session cookie (the local stack, `tagpin local`).",
    )
    console_token: SecretStr | None = Field(
        default=None,
        min_length=16,
        description="`console_auth=token` only (the local stack): the token that signs a person in. "
        "Compared in constant time, never logged.",
    )
    console_session_key: SecretStr | None = Field(
        default=None,
        min_length=32,
        description="`console_auth=token` only (the local stack): the key of the console's "
        "HMAC-signed session cookies and CSRF tokens.",
    )
    notify_topic_arn: str | None = Field(
        default=None, description="SNS topic for rollout notifications (optional: no SNS when empty)."
    )
    reconcile_resolves: bool = Field(
        default=True,
        description="The reconciler asks the registries for every followed tag on each run; the "
        "template sets it when polling is off (PollSchedule=off), else the reconciler uses the digests "
        "the poller stored.",
    )
    poll_concurrency: int = Field(
        default=64,
        ge=1,
        le=1024,
        description="Registry requests in flight in one poll, all registries together.",
    )
    registry_concurrency: int = Field(
        default=32, ge=1, le=1024, description="Registry requests in flight to one registry host."
    )
    poll_parts: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Invocations a scheduled poll is split into (template parameter PollParts): above 1 "
        "the scheduled invocation starts that many parts asynchronously, each polling a fixed set of "
        "the 64 shards with its own cursor and time budget. About one part per 5,000 tags.",
    )

    @model_validator(mode="after")
    def _one_config_source(self) -> Settings:
        if self.config_parameter is not None and self.config_file is not None:
            raise ValueError(f"set only one of {variable('config_parameter')} and {variable('config_file')}")
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read and validate the environment (``os.environ``, or ``environ``); ``SettingsError``
        names every bad variable. Empty variables count as unset (a template parameter left empty)."""
        values: dict[str, str] = {}
        for name, value in (os.environ if environ is None else environ).items():
            field = name.lower().removeprefix(PREFIX.lower())
            if value and name.upper().startswith(PREFIX) and field in cls.model_fields:
                values[field] = value
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = []
            for error in exc.errors(include_url=False, include_input=False):
                where = ".".join(str(p) for p in error["loc"])
                name = variable(where) if where else "environment"
                problems.append(f"{name}: {str(error['msg']).removeprefix('Value error, ')}")
            raise SettingsError("; ".join(problems)) from None

    @classmethod
    def for_function(cls, function: Function) -> Settings:
        """The settings, with every variable ``function`` needs present."""
        settings = cls.from_env()
        required = [n for n in NEEDS[function] if n not in OPTIONAL or (function, n) in REQUIRED_HERE]
        missing = [name for name in required if not settings.has(name)]
        if missing:
            names = ", ".join(
                f"{variable('config_parameter')} (or {variable('config_file')})"
                if m == CONFIG
                else variable(m)
                for m in missing
            )
            raise SettingsError(f"the {function} function needs {names}; see docs/configuration.md")
        if function == "console" and settings.console_auth is ConsoleAuth.TOKEN:
            unset = [variable(n) for n in ("console_token", "console_session_key") if not settings.has(n)]
            if unset:
                raise SettingsError(
                    f"{variable('console_auth')}=token needs {', '.join(unset)}; see docs/configuration.md"
                )
        return settings

    def has(self, name: str) -> bool:
        if name == CONFIG:
            return bool(self.config_parameter or self.config_file)
        return bool(getattr(self, name))

    def require(self, name: str) -> str:
        """A variable that must be set where it is used."""
        value = getattr(self, name)
        if not value:
            raise SettingsError(f"{variable(name)} is not set; see docs/configuration.md")
        return str(value)
