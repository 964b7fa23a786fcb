"""Poller: on schedule, resolve every followed tag and enqueue what moved or is behind."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import wiring
from tagpin.observability import logger, metrics


@logger.inject_lambda_context(correlation_id_path="id")  # the schedule event's id
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    results = wiring.detector().check_all(
        wiring.followed().values(), trigger="poll", correlation_id=logger.get_correlation_id()
    )
    summary = {
        "checked": len(results),
        "changed": sum(r.outcome == "changed" for r in results),
        "enqueued": sum(r.enqueued for r in results),
        "errors": sum(r.outcome == "error" for r in results),
    }
    for name, value in summary.items():
        metrics.add_metric(name=f"Poll{name.capitalize()}", unit=MetricUnit.Count, value=value)
    logger.info("poll finished", extra=summary)
    return {**summary, "results": [r.as_dict() for r in results]}
