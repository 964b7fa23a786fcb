"""The local stack's AWS side (:mod:`tagpin_local.stack`): moto's server as the endpoint, the
functions' environment, the resources template.yaml creates (tables, queues, topics) and the
secrets in the store ``StackOptions.secret_store`` names."""

from __future__ import annotations

import functools
import json
import os
import threading
from typing import Any

import boto3
from tagpin.adapters.config_source import STANDARD_LIMIT
from tagpin.adapters.secrets import parameter_name
from tagpin.settings import SecretStore

from tagpin_local.lambda_runtime import REGION
from tagpin_local.stack_options import StackOptions
from tagpin_local.tables import create_state_table

WEBHOOK_SECRET = "tagpin/webhook"  # noqa: S105 (a secret name, not a secret)
CLUSTER_SECRET = "tagpin/clusters/local"  # noqa: S105
CONFIG_PARAMETER = "/tagpin/config"
WEBHOOK_TIMEOUT_S = 15  # template.yaml: WebhookFunction.Timeout


def _cache_moto_modules() -> None:
    """moto's server lists its package directory (about 200 ``isdir`` calls) on every request to
    tell a service name from a host name (``moto.backends.list_of_moto_modules``); the list does
    not change while the process runs, so it is read once. A local-stack speed-up only: it
    changes no answer moto gives. The other lookups made cheaper in the same way:
    :mod:`.moto_lookups`."""
    from moto import backends

    from tagpin_local import moto_lookups

    listing = backends.list_of_moto_modules
    if not hasattr(listing, "cache_info"):  # not cached yet (once per process)
        backends.list_of_moto_modules = functools.cache(lambda: tuple(listing()))
    moto_lookups.install()


def cluster_secret(name: str) -> str:
    """The secret holding a cluster's kubeconfig (the SSM parameter "/" + it by default)."""
    return "tagpin/clusters/" + name


class AwsResources:
    """The stack's AWS resources and secrets (a part of :class:`tagpin_local.stack.LocalStack`,
    which sets these attributes)."""

    options: StackOptions
    aws_endpoint: str
    queue_url: str
    dlq_url: str
    queue_arn: str
    notifications_url: str
    notifications_arn: str
    notifications_dlq_url: str
    topic_arn: str
    alarm_topic_arn: str
    observer_url: str
    webhook_token: str
    console_token: str
    _console_key: str
    _clients: dict[str, Any]
    _clients_lock: threading.Lock
    _saved_env: dict[str, str | None]

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
            # Not "tagpin": powertools names its logger after the service, and a logger named
            # "tagpin" is the library's own, which then gets no JSON format of its own and no
            # "name" key (copy_config_to_registered_loggers skips the source logger's name).
            "POWERTOOLS_SERVICE_NAME": "tagpin-local",
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

    def queue_arn_of(self, url: str) -> str:
        attributes = self.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return str(attributes["Attributes"]["QueueArn"])

    def _create_fifo_queue(self, name: str, dead_letter: dict[str, str]) -> tuple[str, str, str]:
        """A FIFO queue ``<name>.fifo`` whose records go to ``<name>-dlq.fifo`` (its attributes
        ``dead_letter``) after ``max_receive_count`` receives, as template.yaml's queues; deduplication
        by the sender's id. Returns the queue's URL, its ARN and the dead-letter queue's URL."""
        sqs = self.client("sqs")
        arn = self.queue_arn_of
        dlq_url = sqs.create_queue(
            QueueName=f"{name}-dlq.fifo", Attributes={"FifoQueue": "true", **dead_letter}
        )["QueueUrl"]
        redrive = {"deadLetterTargetArn": arn(dlq_url), "maxReceiveCount": self.options.max_receive_count}
        url = sqs.create_queue(
            QueueName=f"{name}.fifo",
            Attributes={
                "FifoQueue": "true",
                "ContentBasedDeduplication": "false",
                "VisibilityTimeout": str(self.options.visibility_timeout),
                "RedrivePolicy": json.dumps(redrive),
            },
        )["QueueUrl"]
        return url, arn(url), dlq_url

    def _create_notifications_queue(self) -> None:
        """template.yaml's NotificationsQueue (standard) and its dead-letter queue: what the webhook
        queued, checked by the webhook again (``EventSources.check_once``)."""
        sqs = self.client("sqs")
        dlq_url = sqs.create_queue(
            QueueName="tagpin-notifications-dlq", Attributes={"MessageRetentionPeriod": "1209600"}
        )["QueueUrl"]
        redrive = {
            "deadLetterTargetArn": self.queue_arn_of(dlq_url),
            "maxReceiveCount": self.options.max_receive_count,
        }
        # Lambda refuses an event source whose queue's VisibilityTimeout is under the function's
        # Timeout: a record is never received again while its check may still run. A check runs
        # past the local default (5 s) with the registry down (the Detector asks again for the
        # notification's digest, 5 requests) or silent (until the invocation's reserve); received
        # again meanwhile, the second check finds the delivery claimed, answers it a duplicate and
        # deletes the message the first reports failed: the notification lost.
        url = sqs.create_queue(
            QueueName="tagpin-notifications",
            Attributes={
                "VisibilityTimeout": str(max(self.options.visibility_timeout, WEBHOOK_TIMEOUT_S)),
                "RedrivePolicy": json.dumps(redrive),
            },
        )["QueueUrl"]
        self.notifications_url, self.notifications_arn = url, self.queue_arn_of(url)
        self.notifications_dlq_url = dlq_url
        self._saved_env.setdefault(
            "TAGPIN_NOTIFICATIONS_QUEUE_URL", os.environ.get("TAGPIN_NOTIFICATIONS_QUEUE_URL")
        )
        os.environ["TAGPIN_NOTIFICATIONS_QUEUE_URL"] = url

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
        self.queue_url, self.queue_arn, self.dlq_url = self._create_fifo_queue(
            "tagpin-changes",
            # as the template's (FailedInvocationsRule files failed invocations in it)
            {"ContentBasedDeduplication": "true", "MessageRetentionPeriod": "1209600"},
        )
        sqs = self.client("sqs")
        os.environ["TAGPIN_QUEUE_URL"] = self.queue_url
        self._create_notifications_queue()
        self._saved_env.setdefault(
            "TAGPIN_DEAD_LETTER_QUEUE_URL", os.environ.get("TAGPIN_DEAD_LETTER_QUEUE_URL")
        )
        os.environ["TAGPIN_DEAD_LETTER_QUEUE_URL"] = self.dlq_url
        self.topic_arn = self.client("sns").create_topic(Name="tagpin-notifications")["TopicArn"]
        os.environ["TAGPIN_NOTIFY_TOPIC_ARN"] = self.topic_arn
        self.observer_url = sqs.create_queue(QueueName="tagpin-notifications-observer")["QueueUrl"]
        self.client("sns").subscribe(
            TopicArn=self.topic_arn,
            Protocol="sqs",
            Endpoint=self.queue_arn_of(self.observer_url),
            Attributes={"RawMessageDelivery": "true"},
        )
        self.alarm_topic_arn = self.client("sns").create_topic(Name="tagpin-alarms")["TopicArn"]
        alarms_url = sqs.create_queue(QueueName="tagpin-alarms-inbox")["QueueUrl"]
        self.client("sns").subscribe(
            TopicArn=self.alarm_topic_arn,
            Protocol="sqs",
            Endpoint=self.queue_arn_of(alarms_url),
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
