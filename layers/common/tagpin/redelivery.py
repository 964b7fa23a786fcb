"""For the queue handlers (consumer, verifier): give each record the batch processor reported failed
its own redelivery delay (``tagpin.domain.redelivery``), instead of the queue's fixed visibility
timeout. A record the handler marked permanent (not a valid message) comes back at once."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from tagpin import wiring
from tagpin.domain.redelivery import PERMANENT, redelivery_delay

logger = logging.getLogger(__name__)


def back_off(
    response: Mapping[str, Any], records: Iterable[Mapping[str, Any]], queue_url: str, permanent: set[str]
) -> None:
    failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
    delays: dict[str, int] = {}
    for record in records:
        message_id = record.get("messageId")
        if message_id not in failed:
            continue
        received = int((record.get("attributes") or {}).get("ApproximateReceiveCount") or 1)
        delays[record["receiptHandle"]] = PERMANENT if message_id in permanent else redelivery_delay(received)
    if not delays:
        return
    try:
        wiring.redelivery(queue_url).later(delays)
    except Exception as exc:  # the records come back after the visibility timeout instead
        logger.warning("could not set the redelivery delays", extra={"error": f"{type(exc).__name__}: {exc}"})
    logger.info("failed records come back later", extra={"delays_s": sorted(delays.values())})
