"""Webhook: registry push notifications.

Two event shapes reach this one function, routed by shape into the same service path:
- HTTP API (payload v2) ``POST /webhooks/{source}``: authenticated per source in the service;
- EventBridge ``ECR Image Action`` events (authorised by IAM: only the rule may invoke).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import wiring
from tagpin.adapters.http_api import HttpRequest, Route, http_request, http_response, not_found
from tagpin.observability import correlation_id, logger, metrics, own_keys

if TYPE_CHECKING:
    from tagpin.usecases.webhook import WebhookResult

wiring.check_settings("webhook")  # cold start: a missing or malformed TAGPIN_* variable stops here, named

# The service and the senders' payload models (pydantic), the configuration and the registry client
# are imported by the first invocation (wiring.webhook_service()), not by this module's import:
# tests/unit/test_function_imports.py keeps them out of it, `make bench-coldstart` prints both.

# One route; not powertools' APIGatewayHttpResolver, whose package import is a tenth of this
# function's cold start (tagpin.adapters.http_api matches the same requests the same way).
RECEIVE = Route("POST", "/webhooks/")


def _count(result: WebhookResult) -> None:
    metrics.add_metric(
        name="WebhookAccepted", unit=MetricUnit.Count, value=int(result.body.get("accepted", 0))
    )


def receive(source: str, request: HttpRequest) -> dict[str, Any]:
    result = wiring.webhook_service().handle(
        source, request.headers, request.body, correlation_id(), query=request.query
    )
    _count(result)
    return http_response(result.status, json.dumps(result.body))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
@own_keys
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from tagpin.adapters.webhooks.ecr import is_ecr_event  # the first invocation imports it, once

    if is_ecr_event(event):
        result = wiring.webhook_service().handle_trusted("ecr", json.dumps(event).encode(), correlation_id())
        _count(result)
        # EventBridge ignores the result; a malformed event is logged (4xx), never retried.
        return {"status": result.status, **result.body}
    request = http_request(event)
    source = RECEIVE.match(request)
    return not_found() if source is None else receive(source, request)
