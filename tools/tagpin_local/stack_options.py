"""What a local stack is started with (:class:`StackOptions`; :mod:`tagpin_local.stack`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tagpin.domain.redelivery import RECEIVES

from tagpin_local.kube.pool import ClusterSource
from tagpin_local.recursion import RecursiveLoop


@dataclass
class StackOptions:
    notifications: bool = True
    poll_interval: float | None = None  # seconds between scheduled poller runs; None = off
    images: list[dict[str, Any]] = field(default_factory=list)  # extra followed images (config form)
    visibility_timeout: int = 5  # local only: AWS uses >= 6x the consumer timeout
    # As on AWS (template.yaml): the handlers' redelivery schedule brings failed records back.
    max_receive_count: int = RECEIVES
    consume: bool = True  # run the SQS loop; tests that drive the consumer themselves turn it off
    # the webhook's own SQS loop (its notifications queue: the checks of what its HTTP path queued);
    # what drives the checks itself (bench/cost: check_once inside a measurement) turns it off
    check_notifications: bool = True
    # the notifications queue's event source's batches at once (its pollers, and the webhook's
    # containers for them beside the ``containers`` of its HTTP calls); None: template.yaml's
    # ScalingConfig.MaximumConcurrency of that event source
    check_concurrency: int | None = None
    clusters: list[str] = field(default_factory=list)  # more clusters besides "local"
    reconcile_interval: float | None = None  # seconds between scheduled reconciler runs; None = off
    rollout: dict[str, Any] | None = None  # the configuration's ``rollout`` section
    rollout_delay: float = 0.0  # seconds a pod takes to become Ready (LocalCluster.rollout_delay)
    # Where the clusters come from: None starts them for the stack (or takes them from the pool
    # of the test session: tagpin_local.kube.pool.use).
    kube_source: ClusterSource | None = None
    log_level: str = "WARNING"
    secret_store: str = "ssm"  # noqa: S105 (where secrets live: tagpin.settings.SecretStore)
    # Containers per function, as Lambda scales out (a cold start each): the webhook and the consumer
    # run up to this many invocations side by side, and the SQS loop receives with as many pollers,
    # so that tests see concurrent invocations (and their races) as they happen on AWS.
    # 1 serialises every invocation of a function.
    containers: int = 3
    # Each container a process of its own, as on Lambda (tagpin_local.lambda_process), and moto's
    # server too (tagpin_local.moto_process), instead of threads of this process: no GIL shared
    # between them, the clusters' fronts and the loops; but what a test does inside this process
    # (monkeypatching, the IAM recorder) does not reach them.
    processes: bool = False
    # With processes: moto's process's scheduling priority (nice; tagpin_local.moto_process.PRIORITY
    # raises it above the stack's, as bench.concurrency does: DynamoDB's lock holder then waits for
    # no core); 0 leaves it as the rest, what a test beside other tests wants.
    moto_priority: int = 0
    # The console's sign-in: "token" (a token exchanged for a session cookie, as `tagpin local`
    # prints it) or "jwt" (as on AWS: every console request needs a bearer token ``jwt_claims``
    # accepts, the JWT authorizer's stand-in, which gives its claims).
    console_auth: str = "token"
    jwt_claims: Callable[[str], dict[str, Any] | None] | None = None
    # Lambda's recursive loop detection (tagpin_local.recursion): each function's RecursiveLoop, as
    # template.yaml sets it (None), or as given here ({"consumer": RecursiveLoop.TERMINATE}: the guard on).
    recursive_loop: dict[str, RecursiveLoop] | None = None
    # template.yaml's GitWriteBack=enabled: the write-back queue, TAGPIN_WRITEBACK_QUEUE_URL and the
    # write-back function with its SQS loop (tagpin_local.stack_git); off, as the template's default
    git_write_back: bool = False
