"""Consumer: the changes queue, with partial batch failures. A change is applied to every target of
its tag; a rollout verification (delayed: due at ``due_at``) follows a patch until the workload has
rolled out, rolls back a failed digest and promotes the next wave."""

# ruff: noqa: E402 (the collector is paused before the imports: tagpin.wiring.poll_gc)
from __future__ import annotations

import gc

gc.disable()  # no collection while the modules load; after_imports resumes it

import threading
from collections import Counter
from typing import Any

# powertools' batch before pydantic: its types module imports powertools' parser models (SQS, Kinesis,
# DynamoDB and Kafka records: some 40 pydantic models built, ~25 ms of the cold start) when pydantic
# is loaded already; the consumer parses its records with none of them (tests/unit/test_cold_imports.py).
import aws_lambda_powertools.utilities.batch  # noqa: F401
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError
from tagpin import wiring
from tagpin.adapters.sqs_fifo import GroupedFifoProcessor
from tagpin.domain.budget import Budget
from tagpin.domain.messages import Change, Verification, parse_message
from tagpin.domain.outcomes import VerificationOutcome
from tagpin.domain.redelivery import PERMANENT
from tagpin.observability import logger, metrics, own_keys, record_keys
from tagpin.redelivery import process_batch
from tagpin.wiring.poll_gc import after_imports

after_imports()

wiring.check_settings("consumer")  # cold start: a missing or malformed TAGPIN_* variable stops here, named

# One group per image (and one per verification): a failing record fails only the later records of
# its own group. The groups of a batch are independent: they are worked side by side, each group's
# records in order (several invocations already work different groups at once). Every failure is
# reported per record (never by raising), so each gets its own redelivery delay.
processor = GroupedFifoProcessor()
processor.raise_on_entire_batch_failure = False  # not an __init__ argument of the FIFO processor
later: dict[str, int] = {}  # records of this invocation that come back after a delay of their own
counting = threading.Lock()  # powertools' add_metric is not atomic: the groups' threads take turns
# A record is started only while this much of the invocation is left: a change's two cluster calls
# per target (read, patch), a rollback's per target, each end within the client's connect + read
# timeout (adapters.kubernetes). What is not started is reported failed and delivered again,
# instead of the whole batch hitting the timeout.
RESERVE_MS = 30_000
# Counted once per rollout: a duplicate verification answers ALREADY_DECIDED and is not counted.
COUNTED = frozenset(
    {VerificationOutcome.VERIFIED, VerificationOutcome.ROLLED_BACK, VerificationOutcome.FAILED}
)


class NotDue(Exception):
    """A verification received before it is due: hidden until then, not an error."""


def record_handler(record: SQSRecord, lambda_context: LambdaContext) -> Any:
    budget = Budget(lambda_context.get_remaining_time_in_millis, RESERVE_MS)
    budget.check(f"message {record.message_id}")
    try:
        message = parse_message(record.body)
    except ValidationError:
        later[record.message_id] = PERMANENT  # neither a change nor a verification: to the dead letters
        raise
    if isinstance(message, Verification):
        wait_ms = message.wait_ms(wiring.clock())
        if wait_ms > 0:
            later[record.message_id] = -(-wait_ms // 1000)
            raise NotDue(f"due in {wait_ms} ms")
        return verify(message)
    return apply(message, budget)


def apply(change: Change, budget: Budget) -> list[dict[str, Any]]:
    # The id of the webhook delivery or the poll run that saw the change, carried by the message.
    move = change.move
    record_keys(move.correlation_id, image=move.image, digest=move.digest, trigger=move.trigger)
    with counting:
        metrics.add_metric(name="ChangesReceived", unit=MetricUnit.Count, value=1)
    results = wiring.applier().apply(change, budget)
    with counting:
        for outcome, count in Counter(r.outcome for r in results).items():
            metrics.add_metric(
                name=f"Targets{outcome.value.title().replace('-', '')}", unit=MetricUnit.Count, value=count
            )
    outcomes = [r.model_dump(mode="json", exclude_none=True) for r in results]
    logger.info("change applied", extra={"outcomes": outcomes})
    return outcomes


def verify(verification: Verification) -> str:
    record_keys(  # the change's correlation id, carried along
        verification.move.correlation_id,
        image=verification.move.image,
        digest=verification.move.digest,
        target=verification.target_id,
    )
    result = wiring.verifier().handle(verification)
    if result.outcome in COUNTED:
        with counting:
            metrics.add_metric(
                name="Rollouts" + result.outcome.value.title().replace("_", ""),
                unit=MetricUnit.Count,
                value=1,
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
    wiring.idempotency_config().register_lambda_context(context)
    return process_batch(
        event,
        context,
        record_handler=record_handler,
        processor=processor,
        later=later,
        queue_url=wiring.setting("queue_url"),
    )
