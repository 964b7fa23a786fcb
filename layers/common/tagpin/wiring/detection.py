"""The composition root's detection side: the poller, the webhook, version channels (and a person
moving a channel's head: ``downgrades``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tagpin import wiring
from tagpin.adapters.secrets import SecretDenied, SecretNotFound
from tagpin.wiring.cache import cached

if TYPE_CHECKING:  # imported by the factories (tagpin.wiring.core says why)
    from tagpin.adapters.sqs import SqsChangeQueue
    from tagpin.ports.parts import PollParts
    from tagpin.usecases.channels import Channels, Downgrades
    from tagpin.usecases.detect import Detector
    from tagpin.usecases.poll import Poller
    from tagpin.usecases.webhook import WebhookService


def change_queue() -> SqsChangeQueue:
    """The changes queue (the consumer's), for whoever sends a change."""
    from tagpin.adapters.sqs import SqsChangeQueue

    return SqsChangeQueue(wiring.aws("sqs"), wiring.setting("queue_url"))


@cached
def detector() -> Detector:
    from tagpin.usecases.attestations import AttestationFilter
    from tagpin.usecases.detect import Detector

    return Detector(
        wiring.registry_client(),
        wiring.state(),
        change_queue(),
        attestations=AttestationFilter(wiring.registry_client(), lambda host: wiring.config().registry(host)),
    )


def poll_parts(function: str) -> PollParts:
    """Starts the parts of a split poll as invocations of ``function`` (the poller itself)."""
    from tagpin.adapters.lambda_parts import LambdaPollParts

    return LambdaPollParts(wiring.aws("lambda"), function)


@cached
def channels() -> Channels:
    """Choosing version channels' heads: listing tags, the versions marked bad."""
    from tagpin.usecases.channels import Channels

    return Channels(wiring.registry_client(), wiring.state())


def downgrades() -> Downgrades:
    """A person moving a version channel's head down, or clearing a version marked bad (CLI)."""
    from tagpin.usecases.channels import Downgrades

    return Downgrades(wiring.channels(), wiring.registry_client(), change_queue(), wiring.clock)


@cached
def poller() -> Poller:
    from tagpin.usecases.poll import Poller

    return Poller(
        wiring.detector(),
        wiring.registry_client(),
        wiring.state(),
        lambda host: wiring.config().registry(host),
        channels=wiring.channels(),
    )


@cached
def webhook_service() -> WebhookService:
    from tagpin.adapters.dynamodb.deliveries import DeliveryStore
    from tagpin.adapters.sqs_notifications import SqsNotificationQueue
    from tagpin.adapters.webhooks.sources import SOURCES
    from tagpin.domain.config import NotConfigured
    from tagpin.usecases.webhook import WebhookService

    secret_name = wiring.setting("webhook_secret")
    deliveries = DeliveryStore(wiring.aws("dynamodb"), wiring.setting("state_table"))
    notifications = SqsNotificationQueue(wiring.aws("sqs"), wiring.setting("notifications_queue_url"))

    def webhook_secrets() -> dict[str, Any]:  # {"<source>": <entry>}, see tagpin.adapters.webhooks.auth
        try:
            return wiring.secret_json(secret_name)
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
        config=wiring.config,
        detector=wiring.detector,
        notifications=lambda: notifications,
        deliveries=lambda: deliveries,
        followed=wiring.followed,
        channels=wiring.channels,
    )
