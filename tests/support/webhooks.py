"""The webhook tests' material: the samples in events/webhooks, and a WebhookService over a real
Detector (fake registry, in-memory queue, moto state and deliveries tables)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from typing import Any, cast

import boto3
import pytest
from tagpin.adapters.dynamodb.deliveries import DeliveryStore
from tagpin.adapters.webhooks.sources import SOURCES
from tagpin.domain.config import TagpinConfig, parse_config
from tagpin.ports.state import State
from tagpin.ports.webhooks import PushEvent
from tagpin.usecases.detect import Detector
from tagpin.usecases.followed import Followed
from tagpin.usecases.webhook import WebhookResult, WebhookService

from tests.support.aws import create_table
from tests.support.clock import FakeClock
from tests.support.constants import D1, DISTRIBUTION_V1, EVENTS, REGION, WEB, WEBHOOK_TOKEN
from tests.support.queues import ListNotificationQueue, ListQueue
from tests.support.registry import ScriptedRegistry

SAMPLES = EVENTS / "webhooks"
SAMPLE_NAMES = sorted(p.name.removesuffix(".expected.json") for p in SAMPLES.glob("*.expected.json"))
SAMPLE_DIGEST = "sha256:39798804c29366d66f8bb733d84981a9aef2dbbddc6168690a5730ca42c40ece"
FOLLOWED = (
    WEB,
    "docker.io/demo/web:stable",
    "ghcr.io/demo/web:stable",
    "europe-west1-docker.pkg.dev/proj/repo/web:stable",
    "123456789012.dkr.ecr.eu-west-1.amazonaws.com/demo/web:stable",
)


UNREACHABLE = "127.0.0.1:9"  # nothing listens there: every check of its tags fails
# A webhook following one tag of the UNREACHABLE registry.
UNREACHABLE_CONFIG = f"""
clusters:
  dev: {{kubeconfig: {{file: /dev/null}}}}
registries:
  {UNREACHABLE}: {{insecure: true}}
images:
  - image: {UNREACHABLE}/demo/web:stable
    targets: [{{cluster: dev, namespace: demo, name: web, container: app}}]
"""


def secret() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SAMPLES / "secret.json").read_text())
    return loaded


def sample(name: str) -> tuple[str, dict[str, Any], list[PushEvent]]:
    """(source, the Lambda event, the expected normalised events)."""
    event = json.loads((SAMPLES / f"{name}.json").read_text())
    expected = json.loads((SAMPLES / f"{name}.expected.json").read_text())
    return expected["source"], event, [PushEvent(**e) for e in expected["events"]]


def http_parts(event: dict[str, Any]) -> tuple[str, dict[str, str], bytes, dict[str, str]]:
    """(source, headers, body, query) of an HTTP API v2 event."""
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode()
    return (
        event["pathParameters"]["source"],
        dict(event["headers"]),
        body,
        dict(event.get("queryStringParameters") or {}),
    )


def envelope(*events: dict[str, Any]) -> bytes:
    """A distribution notification's body: ``{"events": [...]}``."""
    return json.dumps({"events": list(events)}).encode()


def config_following(*images: str) -> TagpinConfig:
    lines = ["clusters:", "  dev: {kubeconfig: {file: /dev/null}}", "images:"]
    for i, image in enumerate(images):
        lines += [
            f"  - image: {image}",
            "    targets:",
            f"      - {{cluster: dev, namespace: n, name: w{i}, container: c}}",
        ]
    return parse_config("\n".join(lines))


class PortCalls:
    """Every call made to a state's repositories, named ``<repository>.<method>`` (``index.entries``,
    ``targets.get_many``...), from any thread: ``wrap`` gives the state that counts them."""

    def __init__(self) -> None:
        self.names: list[str] = []  # list.append is atomic: the records' threads share it

    def wrap(self, state: State) -> State:
        repositories = ("index", "tags", "targets", "heads")
        return replace(
            state, **{name: _Counted(getattr(state, name), name, self.names) for name in repositories}
        )

    def count(self, prefix: str) -> int:
        return sum(name.startswith(prefix) for name in self.names)


class _Counted:
    def __init__(self, inner: object, name: str, names: list[str]) -> None:
        self._inner, self._name, self._names = inner, name, names

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._inner, attribute)
        if not callable(value):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._names.append(f"{self._name}.{attribute}")
            return value(*args, **kwargs)

        return cast(Any, counted)


class Hook:
    """The webhook function's service, following ``FOLLOWED``, with the samples' secrets. The
    registry answers ``D1`` for every tag."""

    def __init__(
        self, store: State, db: Any, table: str, secrets: dict[str, Any] | None = None, *, index: bool = False
    ) -> None:
        """``index``: what is followed read as the deployed webhook reads it (``Followed``: the
        configuration and the state table's index), not from the configuration alone."""
        self.config = config_following(*FOLLOWED)
        self.secrets = secret() if secrets is None else secrets
        self.resolver = ScriptedRegistry(default=D1)
        self.queue = ListQueue()
        self.notifications = ListNotificationQueue()
        self.store = store
        self.detector = self.detector_over(store)
        self.deliveries = DeliveryStore(db, table)
        self.clock = FakeClock(1_763_702_400.0)
        self.service = WebhookService(
            sources=SOURCES,
            secrets=lambda: self.secrets,
            config=lambda: self.config,
            detector=lambda: self.detector,
            notifications=lambda: self.notifications,
            deliveries=lambda: self.deliveries,
            clock=self.clock,
            followed=(lambda: Followed(self.config, store)) if index else None,
        )

    def detector_over(self, store: State) -> Detector:
        """The detector over ``store``: this hook's registry and queue, no confirmation delays."""
        return Detector(
            self.resolver,
            store,
            self.queue,
            clock=FakeClock(1_000_000, step=1_000),
            confirm_delays=(),
            sleep=lambda _s: None,
        )

    def post(
        self, source: str, headers: dict[str, str], body: bytes, query: dict[str, str] | None = None
    ) -> WebhookResult:
        return self.service.handle(source, headers, body, "corr", query=query or {})

    def send(self, event: dict[str, Any]) -> WebhookResult:
        source, headers, body, query = http_parts(event)
        return self.post(source, headers, body, query)

    def delivered(
        self, source: str, headers: dict[str, str], body: bytes, query: dict[str, str] | None = None
    ) -> WebhookResult:
        """Posted, then (once answered 202: queued, nothing checked yet) the queued stage's result;
        a refusal is the HTTP answer."""
        answer = self.post(source, headers, body, query)
        if answer.status != 202:
            return answer
        assert set(answer.body) == {"queued"}, answer.body
        return self.checked()

    def deliver(self, event: dict[str, Any]) -> WebhookResult:
        """An HTTP API event (a sample) posted, then checked (``delivered``)."""
        source, headers, body, query = http_parts(event)
        return self.delivered(source, headers, body, query)

    def checked(self) -> WebhookResult:
        """The queued stage over what the HTTP answers queued so far: ``checked_all``'s results in one
        (the counts added up, the events in order; the last failure raises after the others ran)."""
        return merged(checked_all(self.service, self.notifications))


@dataclass(frozen=True)
class Deployed:
    """The deployed webhook function (functions/webhook/app.py) loaded in process, as Lambda runs it,
    over moto: its handler, the SQS client, the notifications queue's URL and the changes queue's."""

    handler: Any
    sqs: Any
    notifications: str
    changes: str


def deploy_webhook(monkeypatch: pytest.MonkeyPatch, config: str) -> Deployed:
    """The webhook function over moto (under the ``aws`` fixture): the state table, the changes and
    notifications queues, ``config`` as its configuration parameter, the distribution source's
    token (``WEBHOOK_TOKEN``) in its secret, its settings in the environment. The caller resets
    ``tagpin.wiring`` after the test."""
    create_table(boto3.client("dynamodb", region_name=REGION), "tagpin-state", ("pk", "sk"))
    sqs = boto3.client("sqs", region_name=REGION)
    changes = sqs.create_queue(QueueName="changes.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    notifications = sqs.create_queue(QueueName="notifications")["QueueUrl"]
    ssm = boto3.client("ssm", region_name=REGION)
    ssm.put_parameter(Name="/tagpin/config", Value=config, Type="String")
    # the webhook secret in the default store (SecretStore=ssm): the SecureString "/" + its name
    ssm.put_parameter(
        Name="/tagpin/webhook", Value=json.dumps({"distribution": WEBHOOK_TOKEN}), Type="SecureString"
    )
    for name, value in {
        "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
        "TAGPIN_STATE_TABLE": "tagpin-state",
        "TAGPIN_QUEUE_URL": changes,
        "TAGPIN_NOTIFICATIONS_QUEUE_URL": notifications,
        "TAGPIN_WEBHOOK_SECRET": "tagpin/webhook",
        "POWERTOOLS_SERVICE_NAME": "webhook",
        "POWERTOOLS_METRICS_DISABLED": "1",
    }.items():
        monkeypatch.setenv(name, value)
    from tagpin import wiring
    from tagpin_local.lambda_runtime import load_handler

    wiring.reset()
    return Deployed(load_handler("webhook"), sqs, notifications, changes)


def post_distribution(
    handler: Any, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """``body`` posted to the webhook function's ``POST /webhooks/distribution`` (API Gateway's
    HTTP API event) with the distribution source's token and content type (and ``headers``): the
    status and the JSON answer."""
    from tagpin_local.lambda_runtime import LocalContext, http_api_event

    event = http_api_event(
        "POST",
        "/webhooks/distribution",
        "",
        {"authorization": f"Bearer {WEBHOOK_TOKEN}", "content-type": DISTRIBUTION_V1, **(headers or {})},
        body,
        "192.0.2.1",
        "POST /webhooks/{source}",
    )
    response = handler(event, LocalContext("tagpin-webhook", timeout_s=15))
    return int(response["statusCode"]), json.loads(response["body"])


def check_queued(handler: Any, sqs: Any, queue_url: str) -> tuple[int, list[str]]:
    """The webhook function's queued stage, as its SQS event source runs it: every message of the
    notifications queue at ``queue_url`` handed to ``handler`` (a batch at a time), the succeeded
    ones deleted. Returns (how many were handed over, the bodies of those reported failed)."""
    from tagpin_local.lambda_runtime import LocalContext, sqs_event

    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    handed, failed = 0, []
    while messages := sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    ).get("Messages", []):
        response = handler(sqs_event(messages, arn), LocalContext("tagpin-webhook", timeout_s=15))
        failures = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        handed += len(messages)
        failed += [m["Body"] for m in messages if m["MessageId"] in failures]
        for m in messages:
            if m["MessageId"] not in failures:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
    return handed, failed


def checked_all(service: WebhookService, queue: ListNotificationQueue) -> list[WebhookResult]:
    """Every queued notification through the queued stage (``check_queued``), in order; a check that
    raises (it would be received again) raises here, after the others."""
    results: list[WebhookResult] = []
    failure: Exception | None = None
    for body in queue.take():
        try:
            results.append(service.check_queued(body))
        except Exception as exc:  # the record would come back: the others are still checked
            failure = exc
    if failure is not None:
        raise failure
    return results


def merged(results: list[WebhookResult]) -> WebhookResult:
    body: dict[str, Any] = {"accepted": 0, "ignored": 0, "duplicates": 0, "events": []}
    for result in results:
        for key in ("accepted", "ignored", "duplicates"):
            body[key] += result.body.get(key, 0)
        body["events"] += result.body.get("events", [])
    return WebhookResult(202 if all(r.status == 202 for r in results) else 400, body)
