"""Webhook: registry push notifications on POST /webhooks/{source} (HTTP API, payload v2)."""

from __future__ import annotations

import base64
import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import wiring
from tagpin.observability import logger, metrics

app = APIGatewayHttpResolver()


@app.post("/webhooks/<source>")
def receive(source: str) -> Response[str]:
    event = app.current_event
    raw = event.body or ""
    # HMAC and size checks need the exact bytes the sender sent.
    body = base64.b64decode(raw) if event.is_base64_encoded else raw.encode()
    result = wiring.webhook_service().handle(source, dict(event.headers), body, logger.get_correlation_id())
    metrics.add_metric(
        name="WebhookAccepted", unit=MetricUnit.Count, value=int(result.body.get("accepted", 0))
    )
    return Response(result.status, "application/json", json.dumps(result.body))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
