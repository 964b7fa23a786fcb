"""The local stack: tagpin's real handlers wired to real local parts, all on 127.0.0.1.

- moto server (SQS, DynamoDB, SSM, Secrets Manager, STS) as the AWS endpoint; the secrets in the
  store ``StackOptions.secret_store`` names, as the template's ``SecretStore`` (SSM SecureString
  parameters ``/tagpin/...`` by default, or Secrets Manager secrets): ``put_secret`` and friends;
- the CNCF registry (Debian's docker-registry) with push notifications to the webhook adapter;
- an HTTP adapter that turns requests into HTTP API v2 events for the real webhook handler, and for
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
import functools
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Self

import boto3
import yaml
from tagpin.adapters.config_source import STANDARD_LIMIT
from tagpin.adapters.secrets import parameter_name
from tagpin.domain.redelivery import RECEIVES
from tagpin.settings import SecretStore

from tagpin_local.http_adapter import WebhookAdapter, WebhookAdapterHandler
from tagpin_local.kube import KubeCluster
from tagpin_local.kube.local import LocalCluster
from tagpin_local.kube.pool import ClusterSource, default_source
from tagpin_local.lambda_runtime import REGION, REPO, LocalFunction, failure_event, scheduled_event, sqs_event
from tagpin_local.recursion import LoopDetector, RecursiveLoop, delivering, recursive_loop_settings
from tagpin_local.registry_server import RegistryServer
from tagpin_local.tables import create_state_table

log = logging.getLogger("tagpin.local")

WEBHOOK_SECRET = "tagpin/webhook"  # noqa: S105 (a secret name, not a secret)
CLUSTER_SECRET = "tagpin/clusters/local"  # noqa: S105


def _cache_moto_modules() -> None:
    """moto's server lists its package directory (about 200 ``isdir`` calls) on every request to
    tell a service name from a host name (``moto.backends.list_of_moto_modules``); the list does
    not change while the process runs, so it is read once. A local-stack speed-up only: it
    changes no answer moto gives."""
    from moto import backends

    listing = backends.list_of_moto_modules
    if not hasattr(listing, "cache_info"):  # not cached yet (once per process)
        backends.list_of_moto_modules = functools.cache(lambda: tuple(listing()))


def cluster_secret(name: str) -> str:
    """The secret holding a cluster's kubeconfig (the SSM parameter "/" + it by default)."""
    return "tagpin/clusters/" + name


CONFIG_PARAMETER = "/tagpin/config"


@dataclass
class StackOptions:
    notifications: bool = True
    poll_interval: float | None = None  # seconds between scheduled poller runs; None = off
    images: list[dict[str, Any]] = field(default_factory=list)  # extra followed images (config form)
    visibility_timeout: int = 5  # local only: AWS uses >= 6x the consumer timeout
    # As on AWS (template.yaml): the handlers' redelivery schedule brings failed records back.
    max_receive_count: int = RECEIVES
    consume: bool = True  # run the SQS loop; tests that drive the consumer themselves turn it off
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
    # The console's sign-in: "token" (a token exchanged for a session cookie, as `tagpin local`
    # prints it) or "jwt" (as on AWS: every console request needs a bearer token ``jwt_claims``
    # accepts, the JWT authorizer's stand-in, which gives its claims).
    console_auth: str = "token"
    jwt_claims: Callable[[str], dict[str, Any] | None] | None = None
    # Lambda's recursive loop detection (tagpin_local.recursion): each function's RecursiveLoop, as
    # template.yaml sets it (None), or as given here ({"consumer": RecursiveLoop.TERMINATE}: the guard on).
    recursive_loop: dict[str, RecursiveLoop] | None = None


class LocalStack:
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
        self._receive_lock = threading.Lock()
        self._stop = threading.Event()
        self._poll_wake = threading.Event()
        self.functions: dict[str, LocalFunction] = {}
        self.aws_endpoint = ""
        self.queue_url = ""
        self.dlq_url = ""
        self.queue_arn = ""
        self.topic_arn = ""
        self.alarm_topic_arn = ""
        self.observer_url = ""
        self.consumer_errors: list[str] = []
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
        _cache_moto_modules()
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
        timeouts = {"webhook": 15.0, "poller": 300.0, "consumer": 60.0, "reconciler": 300.0, "console": 15.0}
        scaled = {"webhook", "consumer", "console"}  # the scheduled ones run one at a time anyway
        for name, timeout in timeouts.items():
            containers = self.options.containers if name in scaled else 1
            self.functions[name] = LocalFunction(name, timeout_s=timeout, containers=containers)
        assert self._adapter is not None
        self._adapter.function = self.functions["webhook"]
        self._adapter.console = self.functions["console"]
        if self.options.console_auth == "jwt":
            self._adapter.jwt_claims = self.options.jwt_claims or (lambda _token: None)
        if self.options.consume:
            for n in range(self.options.containers):  # Lambda's pollers: batches side by side
                self._spawn(self._sqs_loop, f"sqs-consumer-{n}")
        self._spawn(self._scheduler, "scheduler")
        self._spawn(self._reconcile_scheduler, "reconcile-scheduler")

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

        wiring.reset()

    def set_notifications(self, enabled: bool) -> None:
        """Switch the registry's push notifications on or off (restarts it on the same port)."""
        assert self.registry is not None
        self.options.notifications = enabled
        url = self.webhook_url + "/distribution" if enabled else None
        self.registry.reconfigure(url, {"Authorization": f"Bearer {self.webhook_token}"})

    def set_polling(self, interval: float | None) -> None:
        self.options.poll_interval = interval
        self._poll_wake.set()

    # -- AWS --------------------------------------------------------------------------------
    def client(self, service: str) -> Any:
        """One client per service for the stack's own calls (its SQS loops, tests' reads): boto3
        clients are thread-safe, and creating one costs 0.1-0.5 s of CPU (botocore loads its
        service model from disk), which the SQS loops used to pay every second per poller."""
        with self._clients_lock:
            if service not in self._clients:
                self._clients[service] = boto3.session.Session().client(
                    service, endpoint_url=self.aws_endpoint, region_name=REGION
                )
            return self._clients[service]

    def _set_env(self) -> None:
        values = {
            "AWS_ENDPOINT_URL": self.aws_endpoint,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_SESSION_TOKEN": "local",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "TAGPIN_STATE_TABLE": "tagpin-state",
            "TAGPIN_IDEMPOTENCY_TABLE": "tagpin-idempotency",
            "TAGPIN_CONFIG_PARAMETER": CONFIG_PARAMETER,
            "TAGPIN_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "TAGPIN_SECRET_STORE": self.options.secret_store,
            "POWERTOOLS_SERVICE_NAME": "tagpin",
            "POWERTOOLS_METRICS_NAMESPACE": "tagpin",
            "POWERTOOLS_LOG_LEVEL": self.options.log_level,
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_PARAMETERS_MAX_AGE": "1",
            "TAGPIN_CONSOLE_AUTH": self.options.console_auth,
            "TAGPIN_CONSOLE_TOKEN": self.console_token,
            "TAGPIN_CONSOLE_SESSION_KEY": self._console_key,
        }
        for key, value in values.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value

    def _create_aws_resources(self) -> None:
        ddb = self.client("dynamodb")
        create_state_table(ddb, "tagpin-state")
        ddb.create_table(
            TableName="tagpin-idempotency",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        ddb.update_time_to_live(
            TableName="tagpin-idempotency",
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"},
        )
        sqs = self.client("sqs")
        self.dlq_url = sqs.create_queue(
            QueueName="tagpin-changes-dlq.fifo",
            Attributes={
                "FifoQueue": "true",
                "ContentBasedDeduplication": "true",  # as the template's (FailedInvocationsRule)
                "MessageRetentionPeriod": "1209600",
            },
        )["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.queue_url = sqs.create_queue(
            QueueName="tagpin-changes.fifo",
            Attributes={
                "FifoQueue": "true",
                "ContentBasedDeduplication": "false",
                "VisibilityTimeout": str(self.options.visibility_timeout),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": self.options.max_receive_count}
                ),
            },
        )["QueueUrl"]
        self.queue_arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        os.environ["TAGPIN_QUEUE_URL"] = self.queue_url
        self._saved_env.setdefault(
            "TAGPIN_DEAD_LETTER_QUEUE_URL", os.environ.get("TAGPIN_DEAD_LETTER_QUEUE_URL")
        )
        os.environ["TAGPIN_DEAD_LETTER_QUEUE_URL"] = self.dlq_url
        self.topic_arn = self.client("sns").create_topic(Name="tagpin-notifications")["TopicArn"]
        os.environ["TAGPIN_NOTIFY_TOPIC_ARN"] = self.topic_arn
        self.observer_url = sqs.create_queue(QueueName="tagpin-notifications-observer")["QueueUrl"]
        observer_arn = sqs.get_queue_attributes(QueueUrl=self.observer_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.client("sns").subscribe(
            TopicArn=self.topic_arn,
            Protocol="sqs",
            Endpoint=observer_arn,
            Attributes={"RawMessageDelivery": "true"},
        )
        self.alarm_topic_arn = self.client("sns").create_topic(Name="tagpin-alarms")["TopicArn"]
        alarms_url = sqs.create_queue(QueueName="tagpin-alarms-inbox")["QueueUrl"]
        self.client("sns").subscribe(
            TopicArn=self.alarm_topic_arn,
            Protocol="sqs",
            Endpoint=sqs.get_queue_attributes(QueueUrl=alarms_url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ],
        )
        self._put_secret(WEBHOOK_SECRET, json.dumps({"distribution": self.webhook_token}))

    def _put_secret(self, name: str, value: str) -> None:
        self.put_secret(name, value)

    # -- secrets, in the store the functions read (StackOptions.secret_store) ----------------
    @property
    def secrets_in_ssm(self) -> bool:
        return SecretStore(self.options.secret_store) is SecretStore.SSM

    def put_secret(self, name: str, value: str, key: str | None = None) -> None:
        """Create or overwrite the secret ``name`` (``tagpin/...``), as an operator does
        (docs/deploying.md): the SecureString parameter ``/<name>`` (Standard tier when it fits,
        Advanced otherwise), or the Secrets Manager secret; ``key``: a customer KMS key."""
        if self.secrets_in_ssm:
            extra = {"KeyId": key} if key else {}
            tier = "Standard" if len(value.encode()) <= STANDARD_LIMIT else "Advanced"
            self.client("ssm").put_parameter(
                Name=parameter_name(name),
                Value=value,
                Type="SecureString",
                Tier=tier,
                Overwrite=True,
                **extra,
            )
            return
        secrets = self.client("secretsmanager")
        try:
            secrets.describe_secret(SecretId=name)
        except secrets.exceptions.ResourceNotFoundException:
            secrets.create_secret(Name=name, SecretString=value, **({"KmsKeyId": key} if key else {}))
            return
        if key:
            secrets.update_secret(SecretId=name, KmsKeyId=key)
        secrets.put_secret_value(SecretId=name, SecretString=value)

    def secret_value(self, name: str) -> str:
        if self.secrets_in_ssm:
            parameter = self.client("ssm").get_parameter(Name=parameter_name(name), WithDecryption=True)
            return str(parameter["Parameter"]["Value"])
        return str(self.client("secretsmanager").get_secret_value(SecretId=name)["SecretString"])

    def delete_secret(self, name: str) -> None:
        if self.secrets_in_ssm:
            self.client("ssm").delete_parameter(Name=parameter_name(name))
        else:
            self.client("secretsmanager").delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)

    # -- the event sources --------------------------------------------------------------------
    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _start_adapter(self) -> None:
        self._adapter = WebhookAdapter(("127.0.0.1", 0), WebhookAdapterHandler)
        self._spawn(
            lambda: self._adapter.serve_forever(poll_interval=0.05) if self._adapter else None, "webhook"
        )

    def run_poller(self) -> Any:
        """One poll, invoked and waited for (its errors raise here)."""
        return self.functions["poller"].invoke(scheduled_event())

    def run_reconciler(self) -> Any:
        """One reconcile, invoked and waited for (its errors raise here)."""
        return self.functions["reconciler"].invoke(scheduled_event())

    def invoke_async(self, function: str, event: dict[str, Any]) -> bool:
        """Invoke ``function`` as EventBridge does (asynchronously): on an error once more
        (``MaximumRetryAttempts: 1``), then its failure record is put on the default bus, which
        the template's FailedInvocationsRule files in the dead-letter queue (group
        ``failed-invocations``). Lambda waits about a minute before the retry; here it is at once.
        True when an attempt succeeded."""
        error: Exception | None = None
        for _attempt in range(2):
            try:
                self.functions[function].invoke(event)
                return True
            except Exception as exc:
                error = exc
                log.warning("%s invocation failed: %s", function, exc)
        assert error is not None
        self.client("sqs").send_message(
            QueueUrl=self.dlq_url,
            MessageBody=json.dumps(failure_event(f"tagpin-{function}", event, error, attempts=2)),
            MessageGroupId="failed-invocations",
        )
        return False

    def _reconcile_scheduler(self) -> None:
        while not self._stop.is_set():
            interval = self.options.reconcile_interval
            if interval is None:
                self._stop.wait(timeout=1.0)
                continue
            self.invoke_async("reconciler", scheduled_event("tagpin-reconcile"))
            self._stop.wait(timeout=interval)

    def _scheduler(self) -> None:
        while not self._stop.is_set():
            interval = self.options.poll_interval
            if interval is None:
                self._poll_wake.wait(timeout=1.0)
                self._poll_wake.clear()
                continue
            self.invoke_async("poller", scheduled_event())
            self._poll_wake.wait(timeout=interval)
            self._poll_wake.clear()

    def consume_once(self, wait_s: int = 1) -> int:
        """Receive up to 10 messages, invoke the consumer as Lambda's SQS poller does, delete what
        succeeded; failed records stay and reappear after the visibility timeout."""
        sqs = self.client("sqs")
        # One receive at a time: moto's ReceiveMessage is not atomic (two concurrent calls can
        # both take the same visible message), SQS's is; without this the pollers side by side
        # would be given duplicates real SQS never gives.
        with self._receive_lock:
            messages = sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=wait_s,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
        if not messages:
            return 0
        # Lambda's loop guard: a record past 16 invocations of the consumer in its chain is not
        # handed over (RecursiveLoop: Terminate); it stays on the queue, is delivered again, and the
        # redrive policy dead-letters it after max_receive_count, as SQS does.
        admitted, lineage = self.loops.admit("consumer", messages)
        if not admitted:
            return len(messages)
        try:
            with delivering(lineage):
                response = self.functions["consumer"].invoke(sqs_event(admitted, self.queue_arn)) or {}
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        except Exception as exc:  # the whole batch failed: Lambda lets every record reappear
            log.warning("consumer invocation failed: %s", exc)
            self.consumer_errors.append(f"{type(exc).__name__}: {exc}")
            failed = {m["MessageId"] for m in admitted}
        done = [m for m in admitted if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )
        return len(messages)

    def notifications(self) -> list[dict[str, Any]]:
        """What was published on the notification topic since the last call (oldest first)."""
        sqs = self.client("sqs")
        found: list[dict[str, Any]] = []
        while True:
            messages = sqs.receive_message(
                QueueUrl=self.observer_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not messages:
                return sorted(found, key=lambda m: int(m.get("at", 0)))
            for m in messages:
                found.append(json.loads(m["Body"]))
                sqs.delete_message(QueueUrl=self.observer_url, ReceiptHandle=m["ReceiptHandle"])

    def _sqs_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.consume_once()
            except Exception:
                if self._stop.is_set():
                    return
                log.exception("receive_message failed")
                time.sleep(0.5)
