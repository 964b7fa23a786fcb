"""Logger and metrics, one of each per function (powertools; service name from the environment).

Metrics go out as CloudWatch EMF in the function's log, namespace ``tagpin``, dimension
``service``; per-registry figures carry a ``registry`` dimension of their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import utils
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from tagpin.domain.outcomes import Observation, TagOutcome

logger = Logger()
metrics = Metrics(namespace="tagpin")
# The domain modules log through the standard library; give them the same JSON format.
utils.copy_config_to_registered_loggers(source_logger=logger, include={"tagpin"})


def registry_metrics(results: Iterable[Observation], rate_limits: Mapping[str, Mapping[str, str]]) -> None:
    """``RegistryErrors`` per registry host, and the ``RateLimitRemaining`` a registry reported
    (Docker Hub: ``ratelimit-remaining: 95;w=21600``)."""
    errors = Counter(r.image.split("/", 1)[0] for r in results if r.outcome is TagOutcome.ERROR)
    for host, count in errors.items():
        with single_metric(
            name="RegistryErrors", unit=MetricUnit.Count, value=count, namespace="tagpin"
        ) as m:
            m.add_dimension(name="registry", value=host)
    for host, headers in rate_limits.items():
        remaining = headers.get("ratelimit-remaining", "").split(";", 1)[0].strip()
        if remaining.isdigit():
            with single_metric(
                name="RateLimitRemaining", unit=MetricUnit.Count, value=int(remaining), namespace="tagpin"
            ) as m:
                m.add_dimension(name="registry", value=host)
