"""Each invocation's log keys are its own, also when several run side by side in one process (the
local stack runs every function in one): a line never carries another invocation's function name,
correlation id or digest."""

from __future__ import annotations

import io
import json
import logging
import threading
from typing import Any

from tagpin.observability import logger, own_keys, record_keys
from tagpin_local.lambda_runtime import LocalContext


def test_concurrent_invocations_keep_their_own_keys() -> None:
    both_inside = threading.Barrier(2)

    @own_keys
    def handler(event: dict[str, Any], context: Any) -> None:
        record_keys(f"corr-{event['id']}", digest=event["digest"])
        both_inside.wait(timeout=30)  # the other invocation has set its keys too
        logger.info("from the handler")
        logging.getLogger("tagpin.usecases.apply").info("from the library")
        both_inside.wait(timeout=30)

    stream = io.StringIO()
    previous = logger.registered_handler.setStream(stream)  # type: ignore[attr-defined]
    level = logger.log_level
    logger.setLevel("INFO")
    try:
        runs = [
            threading.Thread(
                target=handler, args=({"id": n, "digest": f"sha256:{n}"}, LocalContext(f"tagpin-{n}"))
            )
            for n in ("consumer", "webhook")
        ]
        for run in runs:
            run.start()
        for run in runs:
            run.join(timeout=60)
        assert not any(run.is_alive() for run in runs)
    finally:
        logger.registered_handler.setStream(previous)  # type: ignore[attr-defined]
        logger.setLevel(level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 4
    for line in lines:
        name = line["function_name"].removeprefix("tagpin-")
        assert (line["correlation_id"], line["digest"]) == (f"corr-{name}", f"sha256:{name}"), line
