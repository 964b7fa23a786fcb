"""The composition root's base: the settings, AWS clients, the configuration, secrets, the registry
client, the state table, the clusters, the followed tags."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from tagpin import aws_warming, wiring
from tagpin.adapters.secrets import Secrets
from tagpin.domain.shards import WHOLE, PollPart
from tagpin.settings import Function, SecretStore, Settings
from tagpin.wiring.cache import cached

# Each factory imports what it builds (as the Kubernetes client always was): a handler's module
# loads the settings and the factories, not the configuration's models, the state table's adapters
# or the registry client (pydantic models, asyncio), which its first invocation imports when it
# calls the factory; ``make bench-coldstart`` prints that invocation beside the import.
if TYPE_CHECKING:
    from tagpin.adapters.config_source import ConfigLoader
    from tagpin.adapters.kubernetes.clusters import ClusterConnector
    from tagpin.adapters.registry.client import RegistryClient
    from tagpin.adapters.registry.credentials import CredentialStore
    from tagpin.adapters.sqs import SqsRedelivery, SqsVerificationQueue
    from tagpin.domain.config import FollowedImage, RolloutSettings, TagpinConfig
    from tagpin.ports.registry import RegistryAccess
    from tagpin.ports.state import State
    from tagpin.usecases.followed import Followed

SECRET_MAX_AGE = 300


@cached
def settings() -> Settings:
    return Settings.from_env()


def check_settings(function: Function) -> Settings:
    """A handler's cold-start check: every variable ``function`` needs is set and well formed."""
    return Settings.for_function(function)


def setting(name: str) -> str:
    """A ``TAGPIN_*`` variable that must be set where it is used (``SettingsError`` names it)."""
    return wiring.settings().require(name)


def clock() -> int:
    """Now, in epoch milliseconds: the clock every use case is given."""
    from tagpin.usecases.detect import now_ms

    return now_ms()


_CLIENTS = threading.Lock()  # a boto3 session is not thread safe (its clients are)


@cached
def aws_session() -> Any:
    """One boto3 session per container: its clients share the service models, endpoints and
    credentials it loaded. A session per client read them again for each: a first invocation's
    DynamoDB and SQS clients cost it twice the CPU of one session's (``make bench-coldstart``)."""
    import boto3

    return boto3.session.Session()


@cached
def aws(service: str, region: str | None = None) -> Any:
    """A client of ``service`` in the function's region, or in ``region``; its operations can be
    rehearsed at a container's start (``aws_warming.install``: its one hook, set at its creation)."""
    with _CLIENTS:
        session = wiring.aws_session()
        client = session.client(service) if region is None else session.client(service, region_name=region)
        return aws_warming.install(client)


def parameters_on_session(provider: str) -> None:
    """powertools' default ``provider`` (``ssm``, ``secrets``), which the configuration and the
    secrets are read through, with a client of the container's session rather than of a session
    of its own (``aws_session`` says why). ``reset`` clears it with the other providers."""
    from aws_lambda_powertools.utilities.parameters import SecretsProvider, SSMProvider, base

    if provider not in base.DEFAULT_PROVIDERS:  # type: ignore[attr-defined]
        built = (
            SSMProvider(boto3_client=wiring.aws("ssm"))
            if provider == "ssm"
            else SecretsProvider(boto3_client=wiring.aws("secretsmanager"))
        )
        base.DEFAULT_PROVIDERS[provider] = built  # type: ignore[attr-defined]


@cached
def config_loader() -> ConfigLoader:
    from tagpin.adapters.config_source import ConfigLoader

    current = wiring.settings()
    if current.config_parameter is not None:
        parameters_on_session("ssm")
    return ConfigLoader(parameter=current.config_parameter, file=current.config_file)


def config() -> TagpinConfig:
    return wiring.config_loader().load()


def rollout_settings() -> RolloutSettings:
    return wiring.config().rollout


@cached
def secrets() -> Secrets:
    """The secret store of the stack (``TAGPIN_SECRET_STORE``): SSM SecureString parameters or
    Secrets Manager secrets, one name per secret either way (``tagpin.adapters.secrets``)."""
    store = wiring.settings().secret_store
    parameters_on_session("ssm" if store is SecretStore.SSM else "secrets")
    return Secrets(store, max_age=SECRET_MAX_AGE)


def secret_text(name: str) -> str:
    """The secret ``name`` (``tagpin/clusters/prod``) as text, from whichever store holds secrets."""
    return wiring.secrets().text(name)


def secret_json(name: str) -> dict[str, Any]:
    """The secret ``name`` as a JSON object, from whichever store holds secrets."""
    return wiring.secrets().json(name)


def ecr_client(region: str, role_arn: str | None) -> Any:
    """An ECR client in ``region``, through ``role_arn`` (cross-account) when given."""
    import boto3

    if role_arn is None:
        return boto3.session.Session().client("ecr", region_name=region)
    creds = wiring.aws("sts").assume_role(RoleArn=role_arn, RoleSessionName="tagpin-registry")["Credentials"]
    return boto3.session.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    ).client("ecr", region_name=region)


@cached
def credential_store() -> CredentialStore:
    from tagpin.adapters.registry.credentials import CredentialStore, EcrTokens

    return CredentialStore(wiring.config, wiring.secret_json, EcrTokens(wiring.ecr_client))


def registry_access(host: str) -> RegistryAccess:
    """Per-host access from the configuration; credentials fetched lazily, so one bad secret only
    fails the tags of its own registry."""
    return wiring.credential_store().access(host)


@cached
def registry_client() -> RegistryClient:
    from tagpin.adapters.registry.client import RegistryClient

    current = wiring.settings()
    return RegistryClient(
        access=wiring.registry_access,
        max_concurrency=current.poll_concurrency,
        per_registry=current.registry_concurrency,
    )


@cached
def state() -> State:
    from tagpin.adapters.dynamodb import dynamodb_state

    return dynamodb_state(
        wiring.aws("dynamodb"),
        wiring.setting("state_table"),
        retention_days=lambda: wiring.config().rollout.history_retention_days,
    )


def followed(part: PollPart = WHOLE) -> Followed:
    """Every followed tag (of a poll's ``part``) and its targets: the configuration's, merged with
    those the reconciler discovered by label (the index in the state table). Read per invocation
    (lazily)."""
    from tagpin.usecases.followed import Followed

    return Followed(wiring.config(), wiring.state(), part)


def followed_images(part: PollPart = WHOLE) -> list[FollowedImage]:
    """Every followed tag the poller checks (in ``part``): the configuration's and the discovered ones."""
    return list(wiring.followed(part).values())


@cached
def cluster_connector() -> ClusterConnector:
    """One API client per cluster, kept across warm invocations (consumer and reconciler only)."""
    from tagpin.adapters.kubernetes.clusters import ClusterConnector

    return ClusterConnector(wiring.config, wiring.secret_text)


def redelivery(queue_url: str) -> SqsRedelivery:
    from tagpin.adapters.sqs import SqsRedelivery

    return SqsRedelivery(wiring.aws("sqs"), queue_url)


@cached
def verification_queue() -> SqsVerificationQueue:
    from tagpin.adapters.sqs import SqsVerificationQueue

    return SqsVerificationQueue(wiring.aws("sqs"), wiring.setting("queue_url"))
