"""Consumer: apply digest changes from the FIFO queue to every target, with partial batch failures."""

from __future__ import annotations

from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError
from tagpin import wiring
from tagpin.domain.budget import Budget
from tagpin.domain.messages import Change
from tagpin.observability import logger, metrics, own_keys, record_keys
from tagpin.redelivery import process_batch

wiring.check_settings("consumer")  # cold start: a missing or malformed TAGPIN_* variable stops here, named

# One group per image: a failing record fails only the later records of its own image. Every
# failure is reported per record (never by raising), so each gets its own redelivery delay.
processor = SqsFifoPartialProcessor(skip_group_on_error=True)
processor.raise_on_entire_batch_failure = False  # not an __init__ argument of the FIFO processor
permanent: set[str] = set()  # records of this invocation that can never succeed
# A target is started only while this much of the invocation is left: its two cluster calls (read,
# patch) each end within the client's connect + read timeout (adapters.kubernetes). What is not
# started is reported failed and delivered again, instead of the whole batch hitting the timeout.
RESERVE_MS = 30_000


def record_handler(record: SQSRecord, lambda_context: LambdaContext) -> list[dict[str, Any]]:
    budget = Budget(lambda_context.get_remaining_time_in_millis, RESERVE_MS)
    budget.check(f"change {record.message_id}")
    try:
        change = Change.model_validate_json(record.body)
    except ValidationError:
        permanent.add(record.message_id)  # not a change: straight on to the dead-letter queue
        raise
    # The id of the webhook delivery or the poll run that saw the change, carried by the message.
    record_keys(change.correlation_id, image=change.image, digest=change.digest, trigger=change.trigger)
    metrics.add_metric(name="ChangesReceived", unit=MetricUnit.Count, value=1)
    results = wiring.applier().apply(change, budget)
    for outcome, count in Counter(r.outcome for r in results).items():
        metrics.add_metric(
            name=f"Targets{outcome.value.title().replace('-', '')}", unit=MetricUnit.Count, value=count
        )
    outcomes = [r.model_dump(mode="json", exclude_none=True) for r in results]
    logger.info("change applied", extra={"outcomes": outcomes})
    return outcomes


@logger.inject_lambda_context
@metrics.log_metrics
@own_keys
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    wiring.idempotency_config().register_lambda_context(context)
    return process_batch(
        event,
        context,
        record_handler=record_handler,
        processor=processor,
        permanent=permanent,
        queue_url=wiring.setting("queue_url"),
    )
