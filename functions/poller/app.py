"""Poller: on schedule, resolve every followed tag once and enqueue what moved or is behind.

Stops cleanly before the Lambda time runs out; the next run continues where this one stopped.
With ``TAGPIN_POLL_PARTS`` above 1 the scheduled invocation only starts the parts (asynchronous
invocations of this function, each a fixed set of shards) and every part polls as above."""

# ruff: noqa: E402 (the collector is paused before the imports: tagpin.wiring.poll_gc)
from __future__ import annotations

import gc

gc.disable()  # no collection while the modules load; collect_for_polls resumes it

import time
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from tagpin import wiring
from tagpin.adapters.lambda_parts import event_part
from tagpin.domain.shards import WHOLE, PollPart
from tagpin.observability import correlation_id, logger, metrics, own_keys, registry_metrics
from tagpin.wiring.poll_gc import collect_for_polls

collect_for_polls()  # fewer collections per poll (tagpin.wiring.poll_gc); bench/poll.py does the same
wiring.check_settings("poller")  # cold start: a missing or malformed TAGPIN_* variable stops here, named

# The configuration's and the messages' models (pydantic), the state table's adapters and the
# registry client are imported by the first invocation, not by this module's import:
# tests/unit/test_function_imports.py keeps them out of it, `make bench-coldstart` prints both.

MAX_RESULTS = 100  # per-tag details in the response (the counts cover everything)


@logger.inject_lambda_context(correlation_id_path="id")  # the schedule event's id
@metrics.log_metrics
@own_keys
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    started = time.monotonic()
    part = event_part(event)
    parts = wiring.settings().poll_parts
    if part is None and parts > 1:  # the scheduled invocation of a split poll: start the parts
        wiring.poll_parts(context.invoked_function_arn).start([PollPart(i, parts) for i in range(parts)])
        metrics.add_metric(name="PollPartsStarted", unit=MetricUnit.Count, value=parts)
        logger.info("poll parts started", extra={"parts": parts})
        return {"parts": parts}
    part = part or WHOLE
    from tagpin.domain.config import NotConfigured  # the first invocation imports them, once
    from tagpin.domain.messages import Trigger

    try:
        followed = wiring.followed_images(part)
    except NotConfigured as exc:  # deployed, not configured yet: nothing to poll, nothing failed
        logger.warning("not configured yet; nothing polled", extra={"reason": str(exc)})
        # A run that covered every followed tag (none), and a part that is not behind: the alarm on
        # poll runs that do not finish is for real trouble, not for a stack that waits for its
        # configuration.
        metrics.add_metric(name="PollRunsCompleted", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="PollBehind", unit=MetricUnit.Count, value=0)
        return {"configured": False, "reason": str(exc)}
    summary = wiring.poller().run(
        followed,
        trigger=Trigger.POLL,
        correlation_id=correlation_id(),
        remaining_ms=context.get_remaining_time_in_millis,
        part=part,
    )
    counts = summary.counts()
    for name, value in counts.items():
        metric = "Poll" + "".join(part.capitalize() for part in name.split("_"))
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=value)
    # A run that reached the end of its tags; and whether its part is behind (its pass went on over an
    # hour and more than one run: tagpin.domain.poll_pass), which PollNotFinishedAlarm watches.
    metrics.add_metric(name="PollRunsCompleted", unit=MetricUnit.Count, value=int(summary.not_reached == 0))
    metrics.add_metric(name="PollBehind", unit=MetricUnit.Count, value=int(summary.behind))
    metrics.add_metric(
        name="PollDuration", unit=MetricUnit.Milliseconds, value=(time.monotonic() - started) * 1000
    )
    rate_limits = wiring.registry_client().rate_limits
    registry_metrics(summary.results, rate_limits)
    logger.info(
        "poll finished",
        extra={**counts, "cursor": summary.cursor, "rate_limits": rate_limits, "part": part.name or "whole"},
    )
    return {
        **counts,
        "part": part.name or "whole",
        "cursor": summary.cursor,
        "rate_limits": rate_limits,
        "results": [r.as_dict() for r in summary.results[:MAX_RESULTS]],
    }
