"""Write-back: the write-back queue (SQS FIFO, one message group per Git repository), with partial
batch failures. The requests of a batch are grouped by repository and written as one commit each
(``tagpin.usecases.writeback``); a request that could not be written (the server down, the
credentials refused) comes back on the redelivery schedule, one that is no request goes to the
dead-letter queue. It reads Git tokens (``tagpin/git/`` secrets) and never loads the kubernetes
client: the verifier (the consumer) follows the rollout the commit starts."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import gitwiring, wiring
from tagpin.observability import logger, metrics, own_keys

wiring.check_settings("writeback")  # cold start: a missing or malformed TAGPIN_* variable stops here, named


@logger.inject_lambda_context
@metrics.log_metrics
@own_keys
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response, outcomes = gitwiring.write_batch(event)
    for outcome, count in outcomes.items():
        metrics.add_metric(name=f"Writes{outcome.value.title()}", unit=MetricUnit.Count, value=count)
    logger.info("written", extra={"outcomes": {o.value: n for o, n in outcomes.items()}})
    return response
