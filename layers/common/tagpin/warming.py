"""Warming a container ahead of its first event: what the first invocation of a function would
build, built at its start (the local runtime does it for each container it starts, as Lambda's
provisioned concurrency does). A handler's own import stays lean; this sits on top of the
composition root (``tagpin.wiring``) and builds through it."""

from __future__ import annotations

import logging
from collections.abc import Callable

from tagpin import wiring
from tagpin.settings import Function

logger = logging.getLogger(__name__)


def _connect_clusters() -> None:
    """A client for each cluster, its API methods' validators built (``KubeWorkloads.prepare``)."""
    connect = wiring.cluster_connector()  # the Kubernetes client imported, whatever the configuration
    for name in wiring.config().clusters:
        try:
            connect(name).prepare()
        except Exception as exc:  # that cluster's targets fail at the invocation, and report it
            logger.debug("warming: the cluster %s failed: %r", name, exc)


def _cluster_nodes() -> None:
    """Each cluster's nodes, which the platform gate reads at a first change and keeps: one call to
    each cluster, its connection opened (TLS) before the first change's read and patch."""
    gate = wiring.platform_gate()
    for name in wiring.config().clusters:
        gate.required(name)  # a cluster not reached: the gate logs it, the configuration decides


def _registry_http() -> None:
    """The registry transport's HTTP stack, which it imports at its first request (~0.2 s)."""
    import aiohttp  # noqa: F401


def _webhook_secret() -> None:
    wiring.secret_json(wiring.setting("webhook_secret"))


def _per_invocation() -> None:
    """What an invocation builds afresh each time, whose modules its first one would import: the
    followed tags (``usecases.followed``) and the clock (``usecases.detect``)."""
    wiring.clock()
    wiring.followed()


def _queued_stage() -> None:
    """The webhook's SQS path (the check of what its HTTP path queued): the batch processor and the
    redelivery schedule its first batch would import."""
    from tagpin.adapters.sqs_fifo import GroupedFifoProcessor
    from tagpin.redelivery import process_batch  # noqa: F401

    GroupedFifoProcessor()


def _registry_access() -> None:
    """Each followed registry's access (its credentials: a secret, or an ECR token, read here rather
    than by the first resolve), and the credential store's module."""
    hosts = {image.image.repository.registry for image in wiring.config().images}
    for host in sorted(hosts):
        try:
            wiring.registry_access(host)
        except Exception as exc:  # that registry's tags fail at the invocation, and report it
            logger.debug("warming: the access to %s failed: %r", host, exc)


BUILDERS: dict[str, tuple[Callable[[], object], ...]] = {
    # The webhook's service takes its detector and channels lazily: built here too (the registry
    # client that re-resolves each pushed digest, the change queue's SQS client).
    "webhook": (
        wiring.webhook_service,
        wiring.detector,
        wiring.channels,
        _registry_http,
        wiring.config,
        _webhook_secret,
        _per_invocation,
        _registry_access,
        _queued_stage,
    ),
    "poller": (wiring.poller, _registry_http, wiring.config, _per_invocation, _registry_access),
    # The consumer reads registries too (the platform and signature gates read the pushed image).
    "consumer": (
        wiring.applier,
        wiring.verifier,
        _connect_clusters,
        _cluster_nodes,
        _per_invocation,
        _registry_http,
        _registry_access,
    ),
    "reconciler": (wiring.reconciler, _connect_clusters, _per_invocation, _registry_http, _registry_access),
    "console": (wiring.console_app, wiring.config),
}


def warm(function: Function) -> None:
    """Build what ``function``'s first invocation would: its services and their AWS clients, the
    configuration, the webhook's secret, and for the functions that patch workloads the Kubernetes
    client (its import is most of a consumer's first invocation) connected to each cluster. Best
    effort: what fails here (a stack not configured yet) is built again, and reported, by the
    invocation."""
    for build in BUILDERS.get(function, ()):
        try:
            build()
        except Exception as exc:  # best effort: the invocation builds it again and reports it
            logger.debug("warming %s: %s failed: %r", function, getattr(build, "__name__", build), exc)
