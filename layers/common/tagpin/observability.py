"""Logger and metrics, one of each per function (powertools; service name from the environment).

Metrics go out as CloudWatch EMF in the function's log, namespace ``tagpin``, dimension
``service``; per-registry figures carry a ``registry`` dimension of their own.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import utils
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from tagpin.domain.outcomes import Observation, TagOutcome


def log_json(record: object) -> str:
    """A log record as JSON that any stream can write: non-ASCII text stays readable (as
    powertools writes it), a lone surrogate (``"\\ud800"`` in a request body decodes to one) is
    written as its JSON escape instead of failing the write, so no log line is lost to its input."""
    text = json.dumps(record, default=str, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


logger = Logger(json_serializer=log_json)
metrics = Metrics(namespace="tagpin")
# The library logs through the standard library under "tagpin": give that logger the same JSON
# format (its children, also those of modules imported later, propagate to it).
logging.getLogger("tagpin")
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
