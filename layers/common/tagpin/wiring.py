"""The composition root: builds the domain objects from the environment, once per container.

Handlers call these; tests and the local stack can build the same objects with their own
parts. AWS endpoints come from the standard SDK configuration (``AWS_ENDPOINT_URL``, region,
credentials), so the same code runs on AWS and against a local moto server.

Environment:
  TAGPIN_CONFIG_PARAMETER | TAGPIN_CONFIG_FILE   where the YAML configuration lives
  TAGPIN_STATE_TABLE                             DynamoDB table for tags and targets
  TAGPIN_QUEUE_URL                               changes queue (poller, webhook)
  TAGPIN_IDEMPOTENCY_TABLE                       powertools idempotency table (consumer)
  TAGPIN_WEBHOOK_SECRET                          Secrets Manager secret: {"<source>": {...}} (webhooks.auth)
  TAGPIN_CHECKS_QUEUE_URL                        rollout checks queue, SQS standard (consumer, verifier)
  TAGPIN_NOTIFY_TOPIC_ARN                        SNS topic for rollout notifications (consumer, verifier)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from tagpin.config import ConfigLoader, FollowedImage, RolloutSettings, TagpinConfig
from tagpin.credentials import CredentialStore, EcrTokens
from tagpin.detect import Detector, now_ms
from tagpin.followed import Followed
from tagpin.queue import SqsChangeQueue
from tagpin.registry import RegistryAccess, RegistryClient
from tagpin.state import StateStore

if TYPE_CHECKING:
    from tagpin.checks import SqsCheckQueue
    from tagpin.clusters import ClusterConnector
    from tagpin.notify import Notifier
    from tagpin.poll import Poller
    from tagpin.promote import Promoter
    from tagpin.reconcile import Reconciler
    from tagpin.rollout import Applier
    from tagpin.verify import Verifier
    from tagpin.webhooks.service import WebhookService

SECRET_MAX_AGE = 300


class MissingSetting(RuntimeError):
    pass


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise MissingSetting(f"environment variable {name} is not set")
    return value


@cache
def aws(service: str) -> Any:
    import boto3

    return boto3.session.Session().client(service)


@cache
def config_loader() -> ConfigLoader:
    return ConfigLoader.from_env()


def config() -> TagpinConfig:
    return config_loader().load()


def secret_text(name: str) -> str:
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(name, max_age=SECRET_MAX_AGE)
    return value.decode() if isinstance(value, bytes) else str(value)


def secret_json(name: str) -> dict[str, Any]:
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(name, transform="json", max_age=SECRET_MAX_AGE)
    if not isinstance(value, dict):
        raise ValueError(f"secret {name} is not a JSON object")
    return value


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
        max_concurrency=int(os.environ.get("TAGPIN_POLL_CONCURRENCY", "64")),
        per_registry=int(os.environ.get("TAGPIN_REGISTRY_CONCURRENCY", "32")),
    )


@cache
def state() -> StateStore:
    return StateStore(
        aws("dynamodb"),
        env("TAGPIN_STATE_TABLE"),
        retention_days=lambda: config().rollout.history_retention_days,
    )


def followed() -> Mapping[str, FollowedImage]:
    """Every followed tag and its targets: the configuration's, merged with those the reconciler
    discovered by label (the index in the state table). Read per invocation (lazily)."""
    return Followed(config(), state())


@cache
def detector() -> Detector:
    from tagpin.attestations import AttestationFilter

    return Detector(
        registry_client(),
        state(),
        SqsChangeQueue(aws("sqs"), env("TAGPIN_QUEUE_URL")),
        attestations=AttestationFilter(registry_client(), lambda host: config().registry(host)),
    )


def followed_images() -> list[FollowedImage]:
    """Every followed tag the poller checks: the configuration's and the discovered ones."""
    return list(followed().values())


@cache
def poller() -> Poller:
    from tagpin.poll import Poller

    return Poller(detector(), registry_client(), state(), lambda host: config().registry(host))


@cache
def webhook_service() -> WebhookService:
    from tagpin.webhooks.deliveries import DeliveryStore
    from tagpin.webhooks.service import WebhookService

    secret_name = env("TAGPIN_WEBHOOK_SECRET")
    deliveries = DeliveryStore(aws("dynamodb"), env("TAGPIN_STATE_TABLE"))
    return WebhookService(
        secrets=lambda: secret_json(secret_name),  # {"<source>": <entry>}, see tagpin.webhooks.auth
        config=config,
        detector=detector,
        deliveries=lambda: deliveries,
        followed=followed,
    )


@cache
def idempotency_guard() -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function

    persistence = DynamoDBPersistenceLayer(
        table_name=env("TAGPIN_IDEMPOTENCY_TABLE"), boto3_client=aws("dynamodb")
    )

    def guard(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        wrapped: Callable[..., dict[str, Any]] = idempotent_function(
            fn,
            data_keyword_argument="target_change",
            persistence_store=persistence,
            config=idempotency_config(),
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
    from tagpin.clusters import ClusterConnector

    return ClusterConnector(config, secret_text)


def rollout_settings() -> RolloutSettings:
    return config().rollout


@cache
def checks_queue() -> SqsCheckQueue:
    from tagpin.checks import SqsCheckQueue

    return SqsCheckQueue(aws("sqs"), env("TAGPIN_CHECKS_QUEUE_URL"))


@cache
def notifier() -> Notifier:
    from tagpin.notify import Notifier

    return Notifier(
        settings=lambda: config().rollout.notifications,
        sns=aws("sns"),
        topic_arn=os.environ.get("TAGPIN_NOTIFY_TOPIC_ARN") or None,
        secret=secret_json,
    )


@cache
def promoter() -> Promoter:
    from tagpin.promote import Promoter

    return Promoter(
        state=state(),
        followed=followed,
        settings=rollout_settings,
        checks=checks_queue(),
        changes=SqsChangeQueue(aws("sqs"), env("TAGPIN_QUEUE_URL")),
        notifier=notifier(),
        clock=now_ms,
    )


@cache
def applier() -> Applier:
    from tagpin.rollout import Applier

    return Applier(
        followed=followed,
        state=state(),
        workloads=cluster_connector(),
        clock=now_ms,
        guard=idempotency_guard(),
        settings=rollout_settings,
        checks=checks_queue(),
        promoter=promoter(),
        notifier=notifier(),
    )


@cache
def verifier() -> Verifier:
    from tagpin.verify import Verifier

    return Verifier(
        state=state(),
        workloads=cluster_connector(),
        followed=followed,
        settings=rollout_settings,
        checks=checks_queue(),
        promoter=promoter(),
        notifier=notifier(),
        clock=now_ms,
    )


@cache
def reconciler() -> Reconciler:
    from tagpin.queue import SqsChangeQueue
    from tagpin.reconcile import Reconciler

    return Reconciler(
        config=config,
        state=state(),
        clusters=cluster_connector(),
        detector=detector(),
        queue=SqsChangeQueue(aws("sqs"), env("TAGPIN_QUEUE_URL")),
        clock=now_ms,
    )


def reset() -> None:
    """Forget every cached client and value (a new container, in effect). Used when the
    environment changes within one process: the local stack and tests start fresh AWS endpoints."""
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import base

    if registry_client.cache_info().currsize:
        registry_client().close()  # its event loop thread and connections
    registry_client.cache_clear()
    for built in (aws, config_loader, state, detector, poller, webhook_service, idempotency_guard):
        built.cache_clear()
    for built in (credential_store,):
        built.cache_clear()
    for built in (idempotency_config, applier, cluster_connector, reconciler):
        built.cache_clear()
    for rollout_part in (checks_queue, notifier, promoter, verifier):
        rollout_part.cache_clear()
    parameters.clear_caches()  # type: ignore[no-untyped-call]
    base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]
