"""Warming a container ahead of its first event: what the first invocation of a function would
build, built at its start (the local runtime does it for each container it starts, as Lambda's
provisioned concurrency does). A handler's own import stays lean; this sits on top of the
composition root (``tagpin.wiring``) and builds through it."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

from tagpin import aws_warming, wiring
from tagpin.domain.channels import is_channel
from tagpin.domain.kinds import DEFAULT_KIND, Kind
from tagpin.domain.refs import ImageRef
from tagpin.settings import Function
from tagpin.usecases import overlap

logger = logging.getLogger(__name__)
REGISTRY_WARMING_S = 1.0  # how long a container's start waits for the followed registries' first answers


def _connect_clusters() -> None:
    """A client for each cluster, its API methods' validators built (``KubeWorkloads.prepare``)."""
    connect = wiring.cluster_connector()  # the Kubernetes client imported, whatever the configuration
    for name in wiring.config().clusters:
        try:
            connect(name).prepare()
        except Exception as exc:  # that cluster's targets fail at the invocation, and report it
            logger.debug("warming: the cluster %s failed: %r", name, exc)


def _cluster_changes() -> None:
    """A change to a workload of each kind the configuration's targets name (and of the default
    kind: a target found by its label), on each cluster's client, rehearsed
    (``adapters.kubernetes.rehearsal``: its read and its patch answered in this thread, nothing
    sent): the client's and the adapter's path of a change, which the first change ran for the
    first time (6 regular expressions compiled, 5,400 Python calls more than a later change; 1,700
    with the rehearsal)."""
    from tagpin.adapters.kubernetes.rehearsal import rehearse_change

    connect = wiring.cluster_connector()
    kinds: dict[str, set[Kind]] = {name: {DEFAULT_KIND} for name in wiring.config().clusters}
    for image in wiring.config().images:
        for target in image.targets:
            kinds.setdefault(target.cluster, set()).add(target.kind)
    for name, found in sorted(kinds.items()):
        for kind in sorted(found):
            try:
                rehearse_change(connect(name), kind)
            except Exception as exc:  # the first change runs that path, and reports what fails
                logger.debug("warming: a %s change on %s not rehearsed: %r", kind, name, exc)


def _cluster_nodes() -> None:
    """Each cluster's nodes, which the platform gate reads at a first change and keeps: one call to
    each cluster, its connection opened (TLS) before the first change's read and patch."""
    gate = wiring.platform_gate()
    for name in wiring.config().clusters:
        gate.required(name)  # a cluster not reached: the gate logs it, the configuration decides


def _pool_workers() -> None:
    """The workers of the pools that overlap an invocation's round trips (``usecases.overlap``),
    which its first overlapped calls would start."""
    overlap.start_workers()


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
    from tagpin.domain.budget import Budget  # noqa: F401
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


def _registry_connections() -> None:
    """Each followed registry asked once for one of its followed tags (a HEAD, what a check's or a
    poll's resolve sends): the registry client's event loop thread and HTTP session started, a
    connection opened and kept alive, a token fetched and cached where the registry wants one, all of
    which the first invocation's first request did (measured after warming: its first resolve 2.7 ms
    of CPU against 0.8, 6 to 14 ms of wall against 2). Bounded (``REGISTRY_WARMING_S``): a registry
    that has not answered by then is cancelled and left to the first invocation, which reports it.
    The transport's HTTP stack (aiohttp, ~0.2 s), which the first request imports, is imported here
    even where no tag is asked (a configuration of channels only)."""
    import aiohttp  # noqa: F401

    refs: dict[str, ImageRef] = {}
    for image in wiring.config().images:
        if not is_channel(image.image):  # a channel's tag is chosen at its check: none to ask for
            refs.setdefault(image.ref.registry, image.ref)
    if refs:
        batch = wiring.registry_client().start_many(
            refs.values(), deadline=time.monotonic() + REGISTRY_WARMING_S
        )
        batch.result(timeout=REGISTRY_WARMING_S + 1)


# An AWS operation a first invocation calls: its service, its name and its parameters (those that
# matter: the table or the queue; ``aws_warming.placeholder`` fills in the other required ones).
Rehearsal = tuple[str, str, Callable[[], dict[str, object]]]


def _state(operation: str, table: str = "state_table") -> Rehearsal:
    """A DynamoDB ``operation`` on the table of the setting ``table`` (its name is a parameter of the
    endpoint's resolution: each table's is resolved once)."""
    if operation == "BatchGetItem":
        return (
            "dynamodb",
            operation,
            lambda: {"RequestItems": {wiring.setting(table): {"Keys": [{"pk": {"S": "-"}}]}}},
        )
    if operation == "TransactWriteItems":  # an update and a put, each conditional (Table.transact)
        return "dynamodb", operation, lambda: {"TransactItems": _transact_items(wiring.setting(table))}
    return "dynamodb", operation, lambda: {"TableName": wiring.setting(table)}


def _transact_items(table: str) -> list[dict[str, Any]]:
    key = {"pk": {"S": "-"}}
    update = {
        "TableName": table,
        "Key": key,
        "UpdateExpression": "SET #a = :a",
        "ConditionExpression": "#a = :a",
        "ExpressionAttributeNames": {"#a": "a"},
        "ExpressionAttributeValues": {":a": {"S": "-"}},
    }
    # a put with its condition too: a promotion's start and its STARTED item (``promotions.start``)
    put = {name: value for name, value in update.items() if name not in ("Key", "UpdateExpression")}
    put["Item"] = key
    return [{"Update": update}, {"Put": put}]


def _send(queue: str) -> Rehearsal:
    return "sqs", "SendMessage", lambda: {"QueueUrl": wiring.setting(queue), "MessageBody": "-"}


_PUBLISH: Rehearsal = (
    "sns",
    "Publish",
    lambda: {"TopicArn": wiring.settings().notify_topic_arn, "Message": "-"},
)
_CHECK = tuple(_state(op) for op in ("BatchGetItem", "PutItem", "Query", "UpdateItem"))
_STATE = (*_CHECK, _state("GetItem"))
# The AWS operations each function's first invocation calls (``aws_warming.rehearse``: nothing is
# sent), named by tests/integration/test_warmed_first_call.py when one is missing: the webhook's HTTP
# call queues the notification, its check reads and records the tag's state and queues the change;
# the poller does the same from its schedule; the consumer also writes its idempotency records,
# publishes a rollout's notification and queues its verification. The reconciler's are not listed
# (its first invocation was not probed). A rehearsed call is recorded as the function's by the
# suite's IAM check (tests/support/iamsession.py): one its role does not allow fails there.
AWS_OPERATIONS: dict[str, tuple[Rehearsal, ...]] = {
    "webhook": (_send("notifications_queue_url"), _send("queue_url"), *_CHECK),
    "poller": (_send("queue_url"), *_STATE),
    "consumer": (
        _send("queue_url"),
        *_STATE,
        _state("TransactWriteItems"),  # a target's state with its history item, a notice with its event
        *(_state(op, "idempotency_table") for op in ("PutItem", "UpdateItem")),
        _PUBLISH,
    ),
}


def _aws_operations(function: Function) -> Callable[[], None]:
    def rehearse() -> None:
        """botocore's setup of each AWS operation the first invocation calls, without calling AWS."""
        for service, operation, params in AWS_OPERATIONS.get(function, ()):
            try:
                aws_warming.rehearse(wiring.aws(service), operation, params())
            except Exception as exc:  # a setting not set: that operation is not called either
                logger.debug("warming: %s.%s not rehearsed: %r", service, operation, exc)

    return rehearse


BUILDERS: dict[str, tuple[Callable[[], object], ...]] = {
    # The webhook's service takes its detector and channels lazily: built here too (the registry
    # client that re-resolves each pushed digest, the change queue's SQS client).
    "webhook": (
        wiring.webhook_service,
        wiring.detector,
        wiring.channels,
        wiring.config,
        _webhook_secret,
        _per_invocation,
        _registry_access,
        _registry_connections,
        _queued_stage,
        _pool_workers,
    ),
    "poller": (
        wiring.poller,
        wiring.config,
        _per_invocation,
        _registry_access,
        _registry_connections,
        _pool_workers,
    ),
    # The consumer reads registries too (the platform and signature gates read the pushed image).
    "consumer": (
        wiring.applier,
        wiring.verifier,
        _connect_clusters,
        _cluster_changes,
        _cluster_nodes,
        _per_invocation,
        _registry_access,
        _registry_connections,
        _pool_workers,
    ),
    "reconciler": (
        wiring.reconciler,
        _connect_clusters,
        _per_invocation,
        _registry_access,
        _registry_connections,
        _pool_workers,
    ),
    "console": (wiring.console_app, wiring.config),
}


def warm(function: Function) -> None:
    """Build what ``function``'s first invocation would: its services and their AWS clients, the
    configuration, the webhook's secret, and for the functions that patch workloads the Kubernetes
    client (its import is most of a consumer's first invocation) connected to each cluster; then
    botocore's setup of the AWS operations it calls, rehearsed (``AWS_OPERATIONS``), and a garbage
    collection. Best effort: what fails here (a stack not configured yet) is built again, and
    reported, by the invocation."""
    for build in (*BUILDERS.get(function, ()), _aws_operations(function)):
        try:
            build()
        except Exception as exc:  # best effort: the invocation builds it again and reports it
            logger.debug("warming %s: %s failed: %r", function, getattr(build, "__name__", build), exc)
    # What warming left (its garbage, and the young objects it built, which survive) collected now:
    # else the first invocation pays that collection (measured with the probe: a warmed webhook's
    # first HTTP call 3 ms of CPU, 13 ms when a collection fell into it). Not ``gc.freeze``: the local
    # stack's thread containers share the stack's process, whose later cyclic garbage it would keep.
    gc.collect()
