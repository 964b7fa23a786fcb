"""The composition root: builds the use cases and their adapters from the settings, once per
container (the top layer: nothing in the library imports it).

Handlers call these; tests and the local stack can build the same objects with their own
parts. Every ``TAGPIN_*`` variable is read by ``tagpin.settings``; AWS endpoints come from the
standard SDK configuration (``AWS_ENDPOINT_URL``, region, credentials), so the same code runs on
AWS and against a local moto server.

One module per concern, every name importable from here: ``core`` (settings, AWS clients, the
configuration, secrets, the registry client, the state table, the clusters), ``detection`` (the
poller, the webhook, version channels), ``rollout`` (admission, the applier, verification,
promotion, approvals, notifications, the reconciler), ``people`` (the console, holds, the
dead-letter queue). The factories call one another through this package (``wiring.state()``),
so a test that replaces one here (``monkeypatch.setattr(wiring, "aws", ...)``) reaches every
caller. Each cached factory is made with ``cached`` (``tagpin.wiring.cache``), which records it:
``reset`` clears them all.
"""

from __future__ import annotations

from collections.abc import Callable

from tagpin.wiring.cache import cached, factories
from tagpin.wiring.core import (
    SECRET_MAX_AGE,
    aws,
    aws_session,
    check_settings,
    clock,
    cluster_connector,
    config,
    config_loader,
    credential_store,
    ecr_client,
    followed,
    followed_images,
    redelivery,
    registry_access,
    registry_client,
    rollout_settings,
    secret_json,
    secret_text,
    secrets,
    setting,
    settings,
    state,
    verification_queue,
)
from tagpin.wiring.detection import (
    change_queue,
    channels,
    detector,
    downgrades,
    poll_parts,
    poller,
    webhook_service,
)
from tagpin.wiring.people import console_app, dead_letters, holds, slack_reply, slack_signing_secret
from tagpin.wiring.rollout import (
    admission,
    applier,
    approvals,
    console_admission,
    git_route,
    idempotency_config,
    idempotency_guard,
    notifier,
    platform_gate,
    promoter,
    reconciler,
    signature_checker,
    trust_material,
    verifier,
)

# What a composition root above this package closes before ``reset`` clears the factories (the
# write-back's repositories: tagpin.gitwiring registers itself here).
RESETS: list[Callable[[], None]] = []

__all__ = [
    "RESETS",
    "SECRET_MAX_AGE",
    "admission",
    "applier",
    "approvals",
    "aws",
    "aws_session",
    "cached",
    "change_queue",
    "channels",
    "check_settings",
    "clock",
    "cluster_connector",
    "config",
    "config_loader",
    "console_admission",
    "console_app",
    "credential_store",
    "dead_letters",
    "detector",
    "downgrades",
    "ecr_client",
    "factories",
    "followed",
    "followed_images",
    "git_route",
    "holds",
    "idempotency_config",
    "idempotency_guard",
    "notifier",
    "platform_gate",
    "poll_parts",
    "poller",
    "promoter",
    "reconciler",
    "redelivery",
    "registry_access",
    "registry_client",
    "reset",
    "rollout_settings",
    "secret_json",
    "secret_text",
    "secrets",
    "setting",
    "settings",
    "signature_checker",
    "slack_reply",
    "slack_signing_secret",
    "state",
    "trust_material",
    "verification_queue",
    "verifier",
    "webhook_service",
]


def reset() -> None:
    """Forget every cached client and value (a new container, in effect). Used when the
    environment changes within one process: the local stack and tests start fresh AWS endpoints."""
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import base

    if registry_client.cache_info().currsize:
        registry_client().close()  # its event loop thread and connections
    for close in RESETS:  # what the composition roots above this one hold open (tagpin.gitwiring)
        close()
    for factory in factories():
        factory.cache_clear()
    parameters.clear_caches()  # type: ignore[no-untyped-call]
    base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]
