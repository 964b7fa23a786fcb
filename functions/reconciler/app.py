"""Reconciler: on schedule, discover labelled workloads in every cluster, keep the index of followed
tags up to date, and enqueue every target that does not run its tag's digest."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import wiring
from tagpin.domain.config import NotConfigured
from tagpin.observability import correlation_id, logger, metrics, own_keys

wiring.check_settings("reconciler")  # cold start: a missing or malformed TAGPIN_* variable stops here, named


@logger.inject_lambda_context(correlation_id_path="id")  # the schedule event's id
@metrics.log_metrics
@own_keys
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        wiring.config()
    except NotConfigured as exc:  # deployed, not configured yet: nothing to reconcile, nothing failed
        logger.warning("not configured yet; nothing reconciled", extra={"reason": str(exc)})
        return {"configured": False, "reason": str(exc)}
    summary = wiring.reconciler().run(correlation_id()).summary()
    for name in ("clusters_skipped", "targets", "added", "removed", "behind", "enqueued"):
        metric = "Reconcile" + "".join(part.capitalize() for part in name.split("_"))
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=summary[name])
    return summary
