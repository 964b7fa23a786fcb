"""Webhook: registry push notifications.

Two event shapes reach this one function, routed by shape into the same service path:
- HTTP API (payload v2) ``POST /webhooks/{source}``: authenticated per source in the service;
- EventBridge ``ECR Image Action`` events (authorised by IAM: only the rule may invoke).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import wiring
from tagpin.adapters.webhooks.ecr import is_ecr_event
from tagpin.observability import correlation_id, logger, metrics, own_keys
from tagpin.usecases.webhook import WebhookResult

wiring.check_settings("webhook")  # cold start: a missing or malformed TAGPIN_* variable stops here, named

app = APIGatewayHttpResolver()


def _count(result: WebhookResult) -> None:
    metrics.add_metric(
        name="WebhookAccepted", unit=MetricUnit.Count, value=int(result.body.get("accepted", 0))
    )


@app.post("/webhooks/<source>")
def receive(source: str) -> Response[str]:
    event = app.current_event
    raw = event.body or ""
    # HMAC and size checks need the exact bytes the sender sent.
    body = base64.b64decode(raw) if event.is_base64_encoded else raw.encode()
    result = wiring.webhook_service().handle(
        source,
        dict(event.headers),
        body,
        correlation_id(),
        query=event.query_string_parameters or {},
    )
    _count(result)
    return Response(result.status, "application/json", json.dumps(result.body))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
@own_keys
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_ecr_event(event):
        result = wiring.webhook_service().handle_trusted("ecr", json.dumps(event).encode(), correlation_id())
        _count(result)
        # EventBridge ignores the result; a malformed event is logged (4xx), never retried.
        return {"status": result.status, **result.body}
    return app.resolve(event, context)
