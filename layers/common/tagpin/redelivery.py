"""For the queue handler (the consumer): give each record the batch processor reported failed its own
redelivery delay (``tagpin.domain.redelivery``), instead of the queue's fixed visibility timeout.
A record the handler gave a delay of its own comes back after it: a verification received before
it is due, when it is due; a record that can never succeed (not a valid message) at once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.typing import LambdaContext

from tagpin import wiring
from tagpin.domain.config import NotConfigured
from tagpin.domain.redelivery import redelivery_delay

logger = logging.getLogger(__name__)


def back_off(
    response: Mapping[str, Any],
    records: Iterable[Mapping[str, Any]],
    queue_url: str,
    later: Mapping[str, int],
) -> None:
    """``later``: message id -> seconds, for the failed records whose delay the handler chose."""
    failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
    delays: dict[str, int] = {}
    for record in records:
        message_id = record.get("messageId")
        if message_id not in failed:
            continue
        received = int((record.get("attributes") or {}).get("ApproximateReceiveCount") or 1)
        chosen = later.get(message_id) if message_id is not None else None
        delays[record["receiptHandle"]] = redelivery_delay(received) if chosen is None else chosen
    if not delays:
        return
    try:
        wiring.redelivery(queue_url).later(delays)
    except Exception as exc:  # the records come back after the visibility timeout instead
        logger.warning("could not set the redelivery delays", extra={"error": f"{type(exc).__name__}: {exc}"})
    logger.info("records come back later", extra={"delays_s": sorted(delays.values())})


def process_batch(
    event: dict[str, Any],
    context: LambdaContext,
    *,
    record_handler: Callable[..., Any],
    processor: Any,
    later: dict[str, int],
    queue_url: str,
) -> dict[str, Any]:
    """A queue handler's batch: each record through ``record_handler`` (partial batch failure),
    then every failed record on its own redelivery schedule (``back_off``); ``later`` is where the
    record handler notes a delay of its own (``PERMANENT``, or a verification's wait)."""
    try:
        wiring.config()
    except NotConfigured as exc:
        # Deployed, not configured yet: every record waits for a later delivery, reported failed
        # without an error, so no error alarm fires for a stack nobody has configured yet; the
        # redelivery schedule keeps them for half an hour before a dead letter.
        logger.warning("not configured yet; records left for later", extra={"reason": str(exc)})
        response: dict[str, Any] = {
            "batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event.get("Records", [])]
        }
    else:
        later.clear()
        response = process_partial_response(  # type: ignore[assignment]
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    back_off(response, event.get("Records", []), queue_url, later)
    return response
