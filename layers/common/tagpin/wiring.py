"""The composition root: builds the use cases and their adapters from the settings, once per
container (the top layer: nothing in the library imports it).

Handlers call these; tests and the local stack can build the same objects with their own
parts. Every ``TAGPIN_*`` variable is read by ``tagpin.settings``; AWS endpoints come from the
standard SDK configuration (``AWS_ENDPOINT_URL``, region, credentials), so the same code runs on
AWS and against a local moto server.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from tagpin.adapters.config_source import ConfigLoader
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.adapters.registry.client import RegistryClient
from tagpin.adapters.registry.credentials import CredentialStore, EcrTokens
from tagpin.adapters.secrets import SecretDenied, SecretNotFound, Secrets
from tagpin.adapters.sqs import SqsChangeQueue
from tagpin.domain.config import FollowedImage, NotConfigured, RolloutSettings, TagpinConfig
from tagpin.domain.shards import WHOLE, PollPart
from tagpin.ports.parts import PollParts
from tagpin.ports.registry import RegistryAccess
from tagpin.ports.state import State
from tagpin.settings import Function, Settings
from tagpin.usecases.detect import Detector, now_ms
from tagpin.usecases.followed import Followed

if TYPE_CHECKING:
    from tagpin.adapters.kubernetes.clusters import ClusterConnector
    from tagpin.adapters.notify import Notifier
    from tagpin.adapters.sqs import SqsRedelivery, SqsVerificationQueue
    from tagpin.console.app import ConsoleApp
    from tagpin.ports.signatures import SignatureChecker, TrustMaterial
    from tagpin.usecases.apply import Applier, Guard
    from tagpin.usecases.approvals import Approvals
    from tagpin.usecases.channels import Channels, Downgrades
    from tagpin.usecases.deadletters import DeadLetterQueue
    from tagpin.usecases.gitroute import GitRoute
    from tagpin.usecases.holds import Holds
    from tagpin.usecases.poll import Poller
    from tagpin.usecases.promote import Promoter
    from tagpin.usecases.reconcile import Reconciler
    from tagpin.usecases.trust import TrustGates
    from tagpin.usecases.verify import Verifier
    from tagpin.usecases.webhook import WebhookService

SECRET_MAX_AGE = 300
RESETS: list[Callable[[], None]] = []  # what reset() also clears


@cache
def settings() -> Settings:
    return Settings.from_env()


def check_settings(function: Function) -> Settings:
    """A handler's cold-start check: every variable ``function`` needs is set and well formed."""
    return Settings.for_function(function)


def setting(name: str) -> str:
    """A ``TAGPIN_*`` variable that must be set where it is used (``SettingsError`` names it)."""
    return settings().require(name)


def clock() -> int:
    """Now, in epoch milliseconds: the clock every use case is given."""
    return now_ms()


@cache
def aws(service: str, region: str | None = None) -> Any:
    """A client of ``service`` in the function's region, or in ``region``."""
    import boto3

    session = boto3.session.Session()
    return session.client(service) if region is None else session.client(service, region_name=region)


@cache
def config_loader() -> ConfigLoader:
    return ConfigLoader(parameter=settings().config_parameter, file=settings().config_file)


def config() -> TagpinConfig:
    return config_loader().load()


@cache
def secrets() -> Secrets:
    """The secret store of the stack (``TAGPIN_SECRET_STORE``): SSM SecureString parameters or
    Secrets Manager secrets, one name per secret either way (``tagpin.adapters.secrets``)."""
    return Secrets(settings().secret_store, max_age=SECRET_MAX_AGE)


def secret_text(name: str) -> str:
    """The secret ``name`` (``tagpin/clusters/prod``) as text, from whichever store holds secrets."""
    return secrets().text(name)


def secret_json(name: str) -> dict[str, Any]:
    """The secret ``name`` as a JSON object, from whichever store holds secrets."""
    return secrets().json(name)


def ecr_client(region: str, role_arn: str | None) -> Any:
    """An ECR client in ``region``, through ``role_arn`` (cross-account) when given."""
    import boto3

    if role_arn is None:
        return boto3.session.Session().client("ecr", region_name=region)
    creds = aws("sts").assume_role(RoleArn=role_arn, RoleSessionName="tagpin-registry")["Credentials"]
    return boto3.session.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    ).client("ecr", region_name=region)


@cache
def credential_store() -> CredentialStore:
    return CredentialStore(config, secret_json, EcrTokens(ecr_client))


def registry_access(host: str) -> RegistryAccess:
    """Per-host access from the configuration; credentials fetched lazily, so one bad secret only
    fails the tags of its own registry."""
    return credential_store().access(host)


@cache
def registry_client() -> RegistryClient:
    return RegistryClient(
        access=registry_access,
        max_concurrency=settings().poll_concurrency,
        per_registry=settings().registry_concurrency,
    )


@cache
def state() -> State:
    return dynamodb_state(
        aws("dynamodb"),
        setting("state_table"),
        retention_days=lambda: config().rollout.history_retention_days,
    )


def followed(part: PollPart = WHOLE) -> Followed:
    """Every followed tag (of a poll's ``part``) and its targets: the configuration's, merged with
    those the reconciler discovered by label (the index in the state table). Read per invocation
    (lazily)."""
    return Followed(config(), state(), part)


@cache
def detector() -> Detector:
    from tagpin.usecases.attestations import AttestationFilter

    return Detector(
        registry_client(),
        state(),
        SqsChangeQueue(aws("sqs"), setting("queue_url")),
        attestations=AttestationFilter(registry_client(), lambda host: config().registry(host)),
    )


def followed_images(part: PollPart = WHOLE) -> list[FollowedImage]:
    """Every followed tag the poller checks (in ``part``): the configuration's and the discovered ones."""
    return list(followed(part).values())


def poll_parts(function: str) -> PollParts:
    """Starts the parts of a split poll as invocations of ``function`` (the poller itself)."""
    from tagpin.adapters.lambda_parts import LambdaPollParts

    return LambdaPollParts(aws("lambda"), function)


@cache
def channels() -> Channels:
    """Choosing version channels' heads: listing tags, the versions marked bad."""
    from tagpin.usecases.channels import Channels

    return Channels(registry_client(), state())


def downgrades() -> Downgrades:
    """A person moving a version channel's head down, or clearing a version marked bad (CLI)."""
    from tagpin.usecases.channels import Downgrades

    return Downgrades(channels(), registry_client(), SqsChangeQueue(aws("sqs"), setting("queue_url")), now_ms)


def holds() -> Holds:
    """A person holding a target where it is, or releasing a hold (CLI)."""
    from tagpin.usecases.holds import Holds

    return Holds(state(), followed, SqsChangeQueue(aws("sqs"), setting("queue_url")), now_ms)


def dead_letters(dead_letter_queue_url: str | None = None, queue_url: str | None = None) -> DeadLetterQueue:
    """The dead-letter queue, for a person: a look (the console) and a redrive (CLI, console)."""
    from tagpin.adapters.sqs import SqsDeadLetters
    from tagpin.usecases.deadletters import DeadLetterQueue

    return DeadLetterQueue(
        SqsDeadLetters(
            aws("sqs"),
            dead_letter_queue_url or setting("dead_letter_queue_url"),
            queue_url or setting("queue_url"),
        )
    )


@cache
def console_app() -> ConsoleApp:
    """The console function's routes, pages and actions (``tagpin.console``)."""
    from tagpin.adapters.web.auth import JwtAuth, TokenAuth
    from tagpin.adapters.web.render import Renderer
    from tagpin.console.app import ConsoleApp
    from tagpin.settings import ConsoleAuth
    from tagpin.usecases.console import Console

    current = settings()
    auth: JwtAuth | TokenAuth = JwtAuth()
    if current.console_auth is ConsoleAuth.TOKEN:
        assert current.console_token is not None and current.console_session_key is not None  # checked
        from tagpin.adapters.dynamodb.sessions import DynamoSignOuts
        from tagpin.adapters.dynamodb.table import Table

        auth = TokenAuth(
            current.console_token.get_secret_value(),
            current.console_session_key.get_secret_value().encode(),
            DynamoSignOuts(Table(aws("dynamodb"), setting("state_table"))),
        )
    console = Console(
        config=config,
        state=state(),
        followed=followed,
        holds=holds,
        dead_letters=dead_letters,
        approvals=approvals,
    )
    return ConsoleApp(console, auth, Renderer(), slack_secret=slack_signing_secret, slack_reply=slack_reply)


def slack_signing_secret() -> str | None:
    """The Slack app's signing secret: ``slack_signing_secret`` in the notification secret."""
    name = config().rollout.notifications.webhooks_secret
    if name is None:
        return None
    try:
        value = secret_json(name).get("slack_signing_secret")
    except SecretNotFound:
        return None
    return value if isinstance(value, str) and value else None


def slack_reply(url: str, message: dict[str, Any]) -> None:
    """Update the message a Slack button was clicked in (its ``response_url``).

    The same stdlib POST the notifier uses: the console's layer does not carry httpx (the
    registry client's aiohttp lives in the poller's and consumer's layer only)."""
    from tagpin.adapters.notify import post_json

    post_json(url, message)


@cache
def poller() -> Poller:
    from tagpin.usecases.poll import Poller

    return Poller(
        detector(), registry_client(), state(), lambda host: config().registry(host), channels=channels()
    )


@cache
def webhook_service() -> WebhookService:
    from tagpin.adapters.dynamodb.deliveries import DeliveryStore
    from tagpin.adapters.webhooks.sources import SOURCES
    from tagpin.usecases.webhook import WebhookService

    secret_name = setting("webhook_secret")
    deliveries = DeliveryStore(aws("dynamodb"), setting("state_table"))

    def webhook_secrets() -> dict[str, Any]:  # {"<source>": <entry>}, see tagpin.adapters.webhooks.auth
        try:
            return secret_json(secret_name)
        except SecretNotFound as exc:  # or denied: the caller learns no more than that
            fix = (
                "create it, or let the webhook's role read it (and decrypt it with its KMS key)"
                if isinstance(exc, SecretDenied)
                else "create it"
            )
            raise NotConfigured(
                "the webhook secret is missing or not readable (docs/deploying.md)",
                reason=f"the webhook secret {secret_name}: {exc}; {fix} (docs/deploying.md)",
            ) from None

    return WebhookService(
        sources=SOURCES,
        secrets=webhook_secrets,
        config=config,
        detector=detector,
        deliveries=lambda: deliveries,
        followed=followed,
        channels=channels,
    )


@cache
def idempotency_guard() -> Guard:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.serialization.pydantic import PydanticSerializer

    from tagpin.domain.outcomes import ApplyResult

    persistence = DynamoDBPersistenceLayer(
        table_name=setting("idempotency_table"), boto3_client=aws("dynamodb")
    )

    def guard(fn: Callable[..., ApplyResult]) -> Callable[..., ApplyResult]:
        wrapped: Callable[..., ApplyResult] = idempotent_function(
            fn,
            data_keyword_argument="target_change",
            persistence_store=persistence,
            config=idempotency_config(),
            output_serializer=PydanticSerializer(model=ApplyResult),
            # A stable prefix, not the function's module path: moving code never forgets results.
            key_prefix="tagpin.apply_target",
        )
        return wrapped

    return guard


@cache
def idempotency_config() -> Any:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    # One roll per (target, digest). A day covers SQS retries and the DLQ redrive window that
    # matters; after that the state's conditional claim and the "already current" check still hold.
    # reconcile_run is null except on the reconciler's healing changes; changed_at identifies the
    # move, so a tag returning to an earlier digest within the day is applied (see models.Change).
    return IdempotencyConfig(
        event_key_jmespath="[target_id, digest, changed_at, reconcile_run]", expires_after_seconds=24 * 3600
    )


@cache
def cluster_connector() -> ClusterConnector:
    """One API client per cluster, kept across warm invocations (consumer and reconciler only)."""
    from tagpin.adapters.kubernetes.clusters import ClusterConnector

    return ClusterConnector(config, secret_text)


def rollout_settings() -> RolloutSettings:
    return config().rollout


def redelivery(queue_url: str) -> SqsRedelivery:
    from tagpin.adapters.sqs import SqsRedelivery

    return SqsRedelivery(aws("sqs"), queue_url)


@cache
def verification_queue() -> SqsVerificationQueue:
    from tagpin.adapters.sqs import SqsVerificationQueue

    return SqsVerificationQueue(aws("sqs"), setting("queue_url"))


@cache
def notifier() -> Notifier:
    from tagpin.adapters.notify import Notifier

    return Notifier(
        settings=lambda: config().rollout.notifications,
        sns=aws("sns"),
        topic_arn=settings().notify_topic_arn or None,
        secret=secret_json,
    )


@cache
def promoter() -> Promoter:
    from tagpin.usecases.promote import Promoter

    return Promoter(
        state=state(),
        followed=followed,
        settings=rollout_settings,
        verifications=verification_queue(),
        changes=SqsChangeQueue(aws("sqs"), setting("queue_url")),
        notifier=notifier(),
        clock=now_ms,
    )


@cache
def applier() -> Applier:
    from tagpin.usecases.apply import Applier

    return Applier(
        followed=followed,
        state=state(),
        workloads=cluster_connector(),
        clock=now_ms,
        guard=idempotency_guard(),
        settings=rollout_settings,
        verifications=verification_queue(),
        promoter=promoter(),
        notifier=notifier(),
        trust=trust_gates(),
        approvals=approvals(),
        gitops=lambda: config().gitops,
        git=git_route(),
    )


@cache
def git_route() -> GitRoute:
    """Owned targets to Git: the write-back queue, when this function has one (tagpin.gitwiring)."""
    from tagpin.adapters.sqs_writes import SqsWriteQueue
    from tagpin.usecases.gitroute import GitRoute

    url = settings().writeback_queue_url
    return GitRoute(lambda: config().gitops, SqsWriteQueue(aws("sqs"), url) if url else None)


@cache
def approvals() -> Approvals:
    """A person's decisions before a wave starts (the consumer asks; the CLI, console and Slack
    decide)."""
    from tagpin.usecases.approvals import Approvals

    return Approvals(
        state=state(),
        settings=rollout_settings,
        changes=SqsChangeQueue(aws("sqs"), setting("queue_url")),
        verifications=verification_queue(),
        notifier=notifier(),
        clock=now_ms,
    )


@cache
def trust_gates() -> TrustGates:
    """The gates a digest passes before a patch (docs/trust.md): the platforms its clusters run,
    the signatures its image or wave requires."""
    from tagpin.usecases.trust import PlatformGate, SignatureGate, TrustGates

    return TrustGates(
        platforms=PlatformGate(registry_client(), cluster_connector(), lambda: config().clusters, now_ms),
        signatures=SignatureGate(signature_checker, trust_material),
        settings=lambda: config().rollout,
    )


@cache
def signature_checker() -> SignatureChecker:
    from tagpin.adapters.signatures import RegistrySignatureChecker

    return RegistrySignatureChecker(registry_client())


@cache
def trust_material() -> TrustMaterial:
    """Signature gates' keys: inline, from the secret store (``tagpin/signing/...``) or AWS KMS."""
    from tagpin.adapters.signatures.material import StoredTrustMaterial

    return StoredTrustMaterial(secret_text, lambda region: aws("kms", region), max_age=SECRET_MAX_AGE)


@cache
def verifier() -> Verifier:
    from tagpin.usecases.gitrevert import GitReverts
    from tagpin.usecases.verify import Verifier

    return Verifier(
        state=state(),
        workloads=cluster_connector(),
        followed=followed,
        settings=rollout_settings,
        verifications=verification_queue(),
        promoter=promoter(),
        notifier=notifier(),
        clock=now_ms,
        approvals=approvals(),
        git=GitReverts(lambda: config().gitops, git_route()),
    )


@cache
def reconciler() -> Reconciler:
    from tagpin.adapters.sqs import SqsChangeQueue
    from tagpin.usecases.reconcile import Reconciler

    return Reconciler(
        config=config,
        state=state(),
        clusters=cluster_connector(),
        detector=detector(),
        queue=SqsChangeQueue(aws("sqs"), setting("queue_url")),
        clock=now_ms,
        resolve=settings().reconcile_resolves,
        channels=channels(),
        notifier=notifier(),
    )


def reset() -> None:
    """Forget every cached client and value (a new container, in effect). Used when the
    environment changes within one process: the local stack and tests start fresh AWS endpoints."""
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import base

    if registry_client.cache_info().currsize:
        registry_client().close()  # its event loop thread and connections
    registry_client.cache_clear()
    for built in (
        settings,
        aws,
        secrets,
        config_loader,
        credential_store,
        state,
        detector,
        channels,
        poller,
        webhook_service,
        idempotency_guard,
        idempotency_config,
        cluster_connector,
        verification_queue,
        notifier,
        promoter,
        trust_gates,
        approvals,
        applier,
        verifier,
        reconciler,
        console_app,
        git_route,
    ):
        built.cache_clear()
    for clear in RESETS:  # the caches of the modules above this one (tagpin.gitwiring)
        clear()
    parameters.clear_caches()  # type: ignore[no-untyped-call]
    base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]
