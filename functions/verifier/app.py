"""Verifier: follow rollouts after the patch, roll back failed digests, promote waves.

Consumes the verification queue (SQS standard, delayed messages; see
tagpin.domain.messages.Verification) with partial batch failures: a verification whose cluster
cannot be reached is retried, then dead-lettered."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError
from tagpin import wiring
from tagpin.domain.budget import Budget
from tagpin.domain.messages import Verification
from tagpin.domain.outcomes import VerificationOutcome
from tagpin.observability import logger, metrics, own_keys, record_keys
from tagpin.redelivery import process_batch

wiring.check_settings("verifier")  # cold start: a missing or malformed TAGPIN_* variable stops here, named

# Every failure is reported per record (never by raising), so each gets its own redelivery delay.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
permanent: set[str] = set()  # records of this invocation that can never succeed
# A verification is started only while this much of the invocation is left (a rollback reads and
# patches each target of the tag; each cluster call ends within the client's timeouts); the rest
# are reported failed and delivered again.
RESERVE_MS = 30_000
# Counted once per rollout: a duplicate verification answers ALREADY_DECIDED and is not counted.
COUNTED = frozenset(
    {VerificationOutcome.VERIFIED, VerificationOutcome.ROLLED_BACK, VerificationOutcome.FAILED}
)


def record_handler(record: SQSRecord, lambda_context: LambdaContext) -> str:
    Budget(lambda_context.get_remaining_time_in_millis, RESERVE_MS).check(f"verification {record.message_id}")
    try:
        verification = Verification.model_validate_json(record.body)
    except ValidationError:
        permanent.add(record.message_id)  # not a verification: straight on to the dead-letter queue
        raise
    record_keys(  # the change's correlation id, carried along
        verification.correlation_id,
        image=verification.image,
        digest=verification.digest,
        target=verification.target_id,
    )
    result = wiring.verifier().handle(verification)
    if result.outcome in COUNTED:
        metrics.add_metric(
            name="Rollouts" + result.outcome.value.title().replace("_", ""), unit=MetricUnit.Count, value=1
        )
    logger.info(
        "verification done",
        extra={
            "kind": verification.kind,
            "attempt": verification.attempt,
            "outcome": result.outcome,
            "detail": result.detail,
        },
    )
    return result.outcome.value


@logger.inject_lambda_context
@metrics.log_metrics
@own_keys
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_batch(
        event,
        context,
        record_handler=record_handler,
        processor=processor,
        permanent=permanent,
        queue_url=wiring.setting("verification_queue_url"),
    )
