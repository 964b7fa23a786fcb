"""The local stack: tagpin's real handlers wired to real local parts, all on 127.0.0.1.

- moto server (SQS, DynamoDB, SSM, Secrets Manager, STS) as the AWS endpoint; the secrets in the
  store ``StackOptions.secret_store`` names, as the template's ``SecretStore`` (SSM SecureString
  parameters ``/tagpin/...`` by default, or Secrets Manager secrets): ``put_secret`` and friends;
- the CNCF registry (Debian's docker-registry) with push notifications to the webhook adapter;
- an HTTP adapter that turns requests into HTTP API v2 events for the real webhook handler (which
  queues what it accepts on the notifications queue, and that queue's event source gives it back
  to the webhook to check, as the template's does: up to its MaximumConcurrency of batches at once,
  in containers of their own beside the HTTP calls'), and for
  the real console handler under ``/console`` (signed in with ``console_token``; with
  ``StackOptions.console_auth="jwt"`` behind a stand-in of the JWT authorizer, ``jwt_claims``);
- a scheduler that invokes the real poller handler with EventBridge schedule events, as an
  asynchronous invocation: retried once, then its failure record filed in the dead-letter queue as
  the template's FailedInvocationsRule does (``invoke_async``);
- an SQS loop that invokes the real consumer handler with real SQS event shapes (changes and
  delayed rollout verifications, one queue), deletes what succeeded and leaves failed records to be
  redelivered and, after maxReceiveCount, dead-lettered;
- a real Kubernetes control plane per cluster (tagpin_local.kube: etcd, kube-apiserver, its
  controllers, kwok for the kubelets, Argo Rollouts' CRD and a stand-in for its controller), reached
  through a kubeconfig kept in a secret, exactly as a non-EKS cluster is reached in AWS, as the
  ServiceAccount bound to docs/rbac.yaml and through a front that can inject faults
  (``LocalCluster``); ``StackOptions.clusters`` adds more clusters (each with its own kubeconfig
  secret). They are started for the stack, or lent by a pool (``StackOptions.kube_source``;
  the test session's, ``tagpin_local.kube.pool``);
- a scheduler for the reconciler (``reconcile_interval``), or ``run_reconciler()`` on demand;
- the SNS topic of rollout notifications, with an SQS queue subscribed to it so that
  ``notifications()`` shows what was published; the alarm topic (no alarms locally), with an SQS
  queue subscribed as the stack's ``AlarmEmail`` would be.

The functions' logs and metrics go to stderr, not stdout (``lambda_runtime.FUNCTION_OUTPUT``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Self

import yaml

from tagpin_local import moto_expressions, moto_partitions, moto_transactions
from tagpin_local.http_adapter import WebhookAdapter
from tagpin_local.kube import KubeCluster
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.pool import ClusterSource, default_source
from tagpin_local.lambda_process import Function, ProcessFunction
from tagpin_local.lambda_runtime import REPO, LocalFunction
from tagpin_local.moto_process import MotoProcess, serialize_dynamodb
from tagpin_local.recursion import LoopDetector, recursive_loop_settings
from tagpin_local.registry_server import RegistryServer
from tagpin_local.stack_aws import (
    CLUSTER_SECRET,
    CONFIG_PARAMETER,
    WEBHOOK_SECRET,
    WEBHOOK_TIMEOUT_S,
    _cache_moto_modules,
    cluster_secret,
)
from tagpin_local.stack_events import SqsEventSource, maximum_concurrency
from tagpin_local.stack_git import WRITEBACK_TIMEOUT_S, GitWriteBack
from tagpin_local.stack_options import StackOptions

__all__ = [
    "CLUSTER_SECRET",
    "CONFIG_PARAMETER",
    "WEBHOOK_SECRET",
    "LocalStack",
    "StackOptions",
    "cluster_secret",
]

log = logging.getLogger("tagpin.local")


class LocalStack(GitWriteBack):
    """The stack: its lifecycle, endpoints and configuration here; its AWS side
    (:mod:`.stack_aws`) and event sources (:mod:`.stack_events`) in the classes it extends."""

    def __init__(self, options: StackOptions | None = None) -> None:
        self.options = options or StackOptions()
        self.webhook_token = secrets.token_urlsafe(24)
        # The console's sign-in token and session key (kept in the functions' environment only).
        self.console_token = secrets.token_urlsafe(24)
        self._console_key = secrets.token_urlsafe(32)
        # Every cluster by its name in the configuration; "local" is ``self.kube`` (after start).
        self.kubes: dict[str, LocalCluster] = {}
        self._kube_source: ClusterSource | None = None
        self._kube_clusters: dict[str, KubeCluster] = {}
        self._starting: Future[dict[str, KubeCluster]] | None = None
        self.registry: RegistryServer | None = None
        self._moto: Any = None
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()
        self._adapter: WebhookAdapter | None = None
        self._threads: list[threading.Thread] = []
        self.sources: dict[str, SqsEventSource] = {}
        self._stop = threading.Event()
        self._poll_wake = threading.Event()
        self.functions: dict[str, Function] = {}
        self.aws_endpoint = ""
        self.queue_url = ""
        self.dlq_url = ""
        self.queue_arn = ""
        self.notifications_url = ""
        self.notifications_arn = ""
        self.notifications_dlq_url = ""
        self.topic_arn = ""
        self.alarm_topic_arn = ""
        self.observer_url = ""
        self.consumer_errors: list[str] = []
        self.webhook_errors: list[str] = []
        self.writeback_errors: list[str] = []
        self._saved_env: dict[str, str | None] = {}
        settings = recursive_loop_settings(REPO / "template.yaml")
        settings.update(self.options.recursive_loop or {})
        self.loops = LoopDetector(settings)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Self:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        from moto.server import ThreadedMotoServer

        # The control planes start meanwhile (the longest part: about 10 s each, side by side).
        self._kube_source = self.options.kube_source or default_source(log.info)
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kube-start")
        self._starting = executor.submit(self._kube_source.acquire, ["local", *self.options.clusters])
        executor.shutdown(wait=False)  # the thread ends with the task
        if self.options.processes:  # its own process, as the functions' containers
            self._moto = MotoProcess(self.options.moto_priority)
        else:
            _cache_moto_modules()
            serialize_dynamodb()
            moto_partitions.install()
            moto_transactions.install()
            moto_expressions.install()
            logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
            self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        self.aws_endpoint = f"http://{host}:{port}"
        # moto keeps its backends per process: start from an empty account every time.
        import httpx

        httpx.post(f"{self.aws_endpoint}/moto-api/reset", timeout=10).raise_for_status()
        self._set_env()
        self._create_aws_resources()
        self.sources["changes"] = SqsEventSource(
            "consumer", self.queue_url, self.queue_arn, self.options.containers, self.consumer_errors
        )
        self.sources["notifications"] = SqsEventSource(
            "webhook",
            self.notifications_url,
            self.notifications_arn,
            self._check_concurrency(),
            self.webhook_errors,
        )
        if self.options.git_write_back:
            self._create_writeback_queues()
        self._kube_clusters, self._starting = self._starting.result(), None
        for name, kube in self._kube_clusters.items():
            self.kubes[name] = cluster = LocalCluster(kube, name)
            if self.options.rollout_delay:
                cluster.rollout_delay = self.options.rollout_delay
            self._put_secret(cluster_secret(name), yaml.safe_dump(cluster.kubeconfig()))
        self._start_adapter()
        self.registry = RegistryServer(
            notify_url=self.webhook_url + "/distribution" if self.options.notifications else None,
            notify_headers={"Authorization": f"Bearer {self.webhook_token}"},
        ).start()
        self.write_config()
        from tagpin import wiring

        wiring.reset()
        self._start_functions()
        assert self._adapter is not None
        self._adapter.function = self.functions["webhook"]
        self._adapter.console = self.functions["console"]
        if self.options.console_auth == "jwt":
            self._adapter.jwt_claims = self.options.jwt_claims or (lambda _token: None)
        # The webhook's own event source (its notifications queue), whatever ``consume`` says.
        if self.options.check_notifications:
            self._start_pollers("notifications")
        if self.options.consume:
            self._start_pollers("changes")
            if self.options.git_write_back:
                self._start_pollers("writeback")
        self._spawn(self._scheduler, "scheduler")
        self._spawn(self._reconcile_scheduler, "reconcile-scheduler")

    def _start_functions(self) -> None:
        timeouts = {
            "webhook": WEBHOOK_TIMEOUT_S,
            "poller": 300.0,
            "consumer": 60.0,
            "reconciler": 300.0,
            "console": 15.0,
        }
        # the scheduled ones run one at a time anyway
        scaled = {"webhook", "consumer", "console", "writeback"}
        if self.options.git_write_back:
            timeouts["writeback"] = WRITEBACK_TIMEOUT_S

        # The webhook's HTTP calls and its event source's batches each have containers of their own:
        # on Lambda a function scales out for whatever invokes it, so an HTTP call never waits for a
        # container behind the checks, which the event source keeps to its MaximumConcurrency.
        checks = self.sources["notifications"].concurrency if self.options.check_notifications else 0

        def start(name: str) -> Function:
            containers = self.options.containers if name in scaled else 1
            if name == "webhook":
                containers += checks
            if self.options.processes:  # every container started with the stack
                return ProcessFunction(name, timeout_s=timeouts[name], containers=containers)
            # threads: one container started with the stack, and for the webhook one for its HTTP
            # calls and one for its checks (as in processes, a first push's check does not wait
            # behind its own HTTP call for a container to start)
            started = 2 if name == "webhook" and checks else 1
            return LocalFunction(name, timeout_s=timeouts[name], containers=containers, started=started)

        if not self.options.processes:  # threads: one after the other (they share the modules)
            self.functions.update((name, start(name)) for name in timeouts)
            return
        with ThreadPoolExecutor(max_workers=len(timeouts)) as pool:  # processes: side by side
            self.functions.update(zip(timeouts, pool.map(start, timeouts), strict=True))

    def _check_concurrency(self) -> int:
        """The notifications queue's event source's batches at once: the stack's option, else the
        template's (its ScalingConfig.MaximumConcurrency)."""
        if self.options.check_concurrency is not None:
            return self.options.check_concurrency
        found = maximum_concurrency(REPO / "template.yaml", "NotificationsQueue")
        if found is None:
            raise ValueError("template.yaml: the NotificationsQueue event source has no MaximumConcurrency")
        return found

    def stop(self) -> None:
        self._stop.set()
        self._poll_wake.set()
        if self._adapter is not None:  # first: its serve_forever thread ends only on shutdown()
            self._adapter.shutdown()
            self._adapter.server_close()
        # One deadline for all the loops (not 10 s each): a loop still inside an invocation (a
        # reconcile, a verification waiting on a cluster) is a daemon thread and is left behind.
        deadline = time.monotonic() + 10
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        for function in self.functions.values():
            function.close()
        if self.registry is not None:
            self.registry.stop()
        for cluster in self.kubes.values():
            cluster.close()
        self.kubes.clear()
        if self._starting is not None:  # started meanwhile, never handed over: given back here
            with contextlib.suppress(Exception):
                self._kube_clusters, self._starting = self._starting.result(), None
        if self._kube_source is not None and self._kube_clusters:
            self._kube_source.release(self._kube_clusters)
            self._kube_clusters = {}
        if self._moto is not None:
            self._moto.stop()
        from tagpin import wiring

        wiring.reset()  # the functions' cached clients (the registry client's loop and connections)
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- endpoints --------------------------------------------------------------------------
    @property
    def kube(self) -> LocalCluster:
        """The cluster "local"."""
        return self.kubes["local"]

    @property
    def webhook_url(self) -> str:
        assert self._adapter is not None
        host, port = self._adapter.server_address[:2]
        return f"http://{host!s}:{port}/webhooks"

    @property
    def console_url(self) -> str:
        return self.webhook_url.removesuffix("/webhooks") + "/console"

    def endpoints(self) -> dict[str, str]:
        assert self.registry is not None
        return {
            "webhook_url": self.webhook_url + "/{source}",
            "console_url": self.console_url,
            "console_token": self.console_token,
            "registry_url": self.registry.url,
            "kubernetes_url": self.kube.kube.url,  # the API server, as people reach it (tagpin: the front)
            "aws_endpoint": self.aws_endpoint,
            "queue_url": self.queue_url,
            "dead_letter_queue_url": self.dlq_url,
            "notifications_queue_url": self.notifications_url,
            "notification_topic_arn": self.topic_arn,
            "alarm_topic_arn": self.alarm_topic_arn,
            "state_table": "tagpin-state",
            "config_parameter": CONFIG_PARAMETER,
            "webhook_secret": WEBHOOK_SECRET,
            "secret_store": self.options.secret_store,
        }

    # -- configuration ----------------------------------------------------------------------
    def config_document(self) -> dict[str, Any]:
        assert self.registry is not None
        images = [
            {
                "image": f"{self.registry.host}/demo/web:stable",
                "targets": [
                    {
                        "cluster": "local",
                        "namespace": "default",
                        "kind": "Deployment",
                        "name": "web",
                        "container": "web",
                    }
                ],
            },
            *self.options.images,
        ]
        document: dict[str, Any] = {
            "clusters": {
                name: {"kubeconfig": {"secret": cluster_secret(name), "context": name}} for name in self.kubes
            },
            "registries": {self.registry.host: {"insecure": True}},
            "images": images,
        }
        if self.options.rollout is not None:
            document["rollout"] = self.options.rollout
        return document

    def write_config(self, document: dict[str, Any] | None = None) -> None:
        text = yaml.safe_dump(document or self.config_document(), sort_keys=False)
        self.client("ssm").put_parameter(Name=CONFIG_PARAMETER, Value=text, Type="String", Overwrite=True)
        from tagpin import wiring

        wiring.reset()  # the functions running in this process (threads)
        for function in self.functions.values():
            function.reset()  # those running in their own (processes)

    def set_notifications(self, enabled: bool) -> None:
        """Switch the registry's push notifications on or off (restarts it on the same port)."""
        assert self.registry is not None
        self.options.notifications = enabled
        url = self.webhook_url + "/distribution" if enabled else None
        self.registry.reconfigure(url, {"Authorization": f"Bearer {self.webhook_token}"})

    def set_polling(self, interval: float | None) -> None:
        self.options.poll_interval = interval
        self._poll_wake.set()
