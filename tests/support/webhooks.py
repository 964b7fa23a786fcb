"""The webhook tests' material: the samples in events/webhooks, and a WebhookService over a real
Detector (fake registry, in-memory queue, moto state and deliveries tables)."""

from __future__ import annotations

import base64
import json
from typing import Any

from tagpin.adapters.dynamodb.deliveries import DeliveryStore
from tagpin.adapters.webhooks.sources import SOURCES
from tagpin.domain.config import TagpinConfig, parse_config
from tagpin.ports.state import State
from tagpin.ports.webhooks import PushEvent
from tagpin.usecases.detect import Detector
from tagpin.usecases.webhook import WebhookResult, WebhookService

from tests.support.clock import FakeClock
from tests.support.constants import D1, EVENTS, WEB
from tests.support.queues import ListQueue
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


class Hook:
    """The webhook function's service, following ``FOLLOWED``, with the samples' secrets. The
    registry answers ``D1`` for every tag."""

    def __init__(self, store: State, db: Any, table: str, secrets: dict[str, Any] | None = None) -> None:
        self.config = config_following(*FOLLOWED)
        self.secrets = secret() if secrets is None else secrets
        self.resolver = ScriptedRegistry(default=D1)
        self.queue = ListQueue()
        self.store = store
        self.detector = Detector(
            self.resolver,
            store,
            self.queue,
            clock=FakeClock(1_000_000, step=1_000),
            confirm_delays=(),
            sleep=lambda _s: None,
        )
        self.deliveries = DeliveryStore(db, table)
        self.clock = FakeClock(1_763_702_400.0)
        self.service = WebhookService(
            sources=SOURCES,
            secrets=lambda: self.secrets,
            config=lambda: self.config,
            detector=lambda: self.detector,
            deliveries=lambda: self.deliveries,
            clock=self.clock,
        )

    def post(
        self, source: str, headers: dict[str, str], body: bytes, query: dict[str, str] | None = None
    ) -> WebhookResult:
        return self.service.handle(source, headers, body, "corr", query=query or {})

    def send(self, event: dict[str, Any]) -> WebhookResult:
        source, headers, body, query = http_parts(event)
        return self.post(source, headers, body, query)
