"""Logger and metrics, one of each per function (powertools; service name from the environment).

Metrics go out as CloudWatch EMF in the function's log, namespace ``tagpin``, dimension
``service``; per-registry figures carry a ``registry`` dimension of their own.
"""

from __future__ import annotations

import functools
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import utils
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

if TYPE_CHECKING:  # a pydantic module; the handlers' modules load without pydantic's models
    from tagpin.domain.outcomes import Observation


def log_json(record: object) -> str:
    """A log record as JSON that any stream can write: non-ASCII text stays readable (as
    powertools writes it), a lone surrogate (``"\\ud800"`` in a request body decodes to one) is
    written as its JSON escape instead of failing the write, so no log line is lost to its input."""
    text = json.dumps(record, default=str, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class QuietMetrics(Metrics):
    """powertools' ``Metrics`` that records nothing while metrics are disabled
    (``POWERTOOLS_METRICS_DISABLED``, DetailedMonitoring=false). powertools 3 keeps adding values
    then (its flush prints nothing and clears nothing) and, once a metric holds 100 values, prints
    the EMF document anyway: a warm container would publish custom metrics every 100 invocations,
    which CloudWatch bills, on a stack that asked for none."""

    def add_metric(self, name: str, unit: MetricUnit | str, value: float, resolution: Any = 60) -> None:
        if is_metrics_disabled():
            return
        super().add_metric(name=name, unit=unit, value=value, resolution=resolution)


logger = Logger(json_serializer=log_json)
metrics = QuietMetrics(namespace="tagpin")
# The library logs through the standard library under "tagpin": give that logger the same JSON
# format (its children, also those of modules imported later, propagate to it).
logging.getLogger("tagpin")
utils.copy_config_to_registered_loggers(source_logger=logger, include={"tagpin"})


def own_keys(handler: Callable[[dict[str, Any], Any], Any]) -> Callable[[dict[str, Any], Any], Any]:
    """Keep an invocation's log keys its own (decorate the handler inside ``inject_lambda_context``).

    powertools' keys are global to the process: right on Lambda, where a container runs one
    invocation at a time, wrong in the local stack, which runs every function side by side in one
    process, so one invocation's ``function_name`` or ``digest`` showed in another's lines. The keys
    of an invocation (its function, request id and correlation id) and of a record (image, digest,
    ...) are kept in powertools' thread-safe keys instead, per thread of execution, which override
    the global ones; they are cleared when the next invocation starts."""

    @functools.wraps(handler)
    def wrapper(event: dict[str, Any], context: Any) -> Any:
        logger.thread_safe_clear_keys()
        keys = {"function_name": context.function_name, "function_request_id": context.aws_request_id}
        if (correlation := correlation_of(event)) is not None:
            keys["correlation_id"] = correlation
        logger.thread_safe_append_keys(**keys)
        return handler(event, context)

    return wrapper


def correlation_of(event: Mapping[str, Any]) -> str | None:
    """An API Gateway request's id, an EventBridge event's (schedules, ECR); None for SQS batches,
    whose records carry their own."""
    request = event.get("requestContext")
    found = request.get("requestId") if isinstance(request, dict) else event.get("id")
    return str(found) if found else None


def correlation_id() -> str | None:
    """This invocation's (or record's) correlation id."""
    value = logger.thread_safe_get_current_keys().get("correlation_id")
    return None if value is None else str(value)


def record_keys(correlation_id: str | None = None, **keys: Any) -> None:
    """Keys of the record being handled (a change, a verification), for its log lines."""
    logger.thread_safe_append_keys(correlation_id=correlation_id, **keys)


def registry_metrics(results: Iterable[Observation], rate_limits: Mapping[str, Mapping[str, str]]) -> None:
    """``RegistryErrors`` per registry host, and the ``RateLimitRemaining`` a registry reported
    (Docker Hub: ``ratelimit-remaining: 95;w=21600``)."""
    from tagpin.domain.outcomes import TagOutcome  # loaded already: the results are Observations

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
