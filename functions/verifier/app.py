"""Verifier: follow rollouts after the patch, roll back failed digests, promote waves.

Consumes the checks queue (SQS standard, delayed messages; see tagpin.checks) with partial batch
failures: a check whose cluster cannot be reached is retried, then dead-lettered."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import wiring
from tagpin.checks import Check
from tagpin.observability import logger, metrics

processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> str:
    check = Check.model_validate_json(record.body)
    logger.set_correlation_id(check.correlation_id)  # the change's, carried by the check
    logger.append_keys(image=check.image, digest=check.digest, target=check.target_id)
    outcome = wiring.verifier().handle(check)
    if outcome in ("verified", "rolled_back", "failed"):
        metrics.add_metric(name="Rollouts" + outcome.title().replace("_", ""), unit=MetricUnit.Count, value=1)
    logger.info("check done", extra={"kind": check.kind, "attempt": check.attempt, "outcome": outcome})
    return outcome


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(  # type: ignore[return-value]
        event=event, record_handler=record_handler, processor=processor, context=context
    )
