"""Webhook: registry push notifications.

Three event shapes reach this one function, routed by shape:
- HTTP API (payload v2) ``POST /webhooks/{source}``: authenticated per source in the service,
  parsed and validated, queued on the notifications queue, answered 202 (the check comes later);
- SQS records of the notifications queue (its event source): each queued notification checked,
  side by side; a check that fails is reported alone (``batchItemFailures``) and comes back;
- EventBridge ``ECR Image Action`` events (authorised by IAM: only the rule may invoke), checked
  at once (EventBridge's invocation is asynchronous already).
"""

# ruff: noqa: E402 (the collector is paused before the imports: tagpin.wiring.poll_gc)
from __future__ import annotations

import gc

gc.disable()  # no collection while the modules load; after_imports resumes it

import json
import threading
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import wiring
from tagpin.adapters.http_api import HttpRequest, Route, http_request, http_response, not_found
from tagpin.observability import correlation_id, logger, metrics, own_keys
from tagpin.wiring.poll_gc import after_imports

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from tagpin.usecases.webhook import WebhookResult

after_imports()
wiring.check_settings("webhook")  # cold start: a missing or malformed TAGPIN_* variable stops here, named

# The service and the senders' payload models (pydantic), the configuration and the registry client
# are imported by the first invocation (wiring.webhook_service()), not by this module's import:
# tests/unit/test_function_imports.py keeps them out of it, `make bench-coldstart` prints both.

# One route; not powertools' APIGatewayHttpResolver, whose package import is a tenth of this
# function's cold start (tagpin.adapters.http_api matches the same requests the same way).
RECEIVE = Route("POST", "/webhooks/")
# What a check keeps of its invocation for after a registry that did not answer: the tag's error
# and its released claim written, the batch's failures reported (a few DynamoDB calls); the rest
# of the function's Timeout (template.yaml) is how long a registry is waited for.
RESERVE_MS = 3_000
counting = threading.Lock()  # powertools' add_metric is not atomic: the records' threads take turns


def _count(result: WebhookResult, name: str = "WebhookAccepted", key: str = "accepted") -> None:
    with counting:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=int(result.body.get(key, 0)))


def receive(source: str, request: HttpRequest) -> dict[str, Any]:
    result = wiring.webhook_service().handle(
        source, request.headers, request.body, correlation_id(), query=request.query
    )
    _count(result, "WebhookQueued", "queued")
    return http_response(result.status, json.dumps(result.body))


def checks(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """A batch of the notifications queue: looked up once (what is followed among all its records'
    tags, their states), its records then checked side by side (the consumer's processor: a standard
    queue's records carry no message group, so each is a group of its own), each failure reported
    alone and brought back on the redelivery schedule (``tagpin.redelivery``: 5 s, 10 s, ... as the
    consumer's records; dead-lettered after maxReceiveCount)."""
    from tagpin.adapters.sqs_fifo import GroupedFifoProcessor
    from tagpin.domain.budget import Budget
    from tagpin.redelivery import process_batch

    wiring.detector()  # built once, on this thread, before the records' threads
    bodies = (str(record.get("body", "")) for record in event.get("Records", []))
    batch = wiring.webhook_service().batch(bodies, Budget(context.get_remaining_time_in_millis, RESERVE_MS))

    def check(record: SQSRecord) -> int:
        """One queued notification checked; raises (the record comes back) when it must be tried again."""
        result = batch.check(record.body, record.message_id)  # its claims held by this message
        _count(result)
        return result.status

    processor = GroupedFifoProcessor()
    processor.raise_on_entire_batch_failure = False  # every record failed: reported, not raised
    return process_batch(
        event,
        context,
        record_handler=check,
        processor=processor,
        later={},
        queue_url=wiring.setting("notifications_queue_url"),
    )


def is_sqs_event(event: dict[str, Any]) -> bool:
    records = event.get("Records")
    return isinstance(records, list) and bool(records) and records[0].get("eventSource") == "aws:sqs"


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
@own_keys
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from tagpin.adapters.webhooks.ecr import is_ecr_event  # the first invocation imports it, once

    if is_sqs_event(event):
        return checks(event, context)
    if is_ecr_event(event):
        from tagpin.domain.budget import Budget

        budget = Budget(context.get_remaining_time_in_millis, RESERVE_MS)
        result = wiring.webhook_service().handle_trusted(
            "ecr", json.dumps(event).encode(), correlation_id(), budget
        )
        _count(result)
        # EventBridge ignores the result; a malformed event is logged (4xx), never retried.
        return {"status": result.status, **result.body}
    request = http_request(event)
    source = RECEIVE.match(request)
    return not_found() if source is None else receive(source, request)
