"""A registry that never answers holds up only its own tags' checks: the webhook's queued stage
waits for it while the invocation's ``Budget`` lasts, and its registry requests never take the
workers its own round trips need (the delivery claims, the read of the tags' states), so every
record of a batch is reported within the invocation, its claim released, however many records
wait on that registry (``tagpin.usecases.overlap``)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import pytest
from tagpin.domain.budget import Budget
from tagpin.ports.state import State
from tagpin.usecases.webhook import CheckFailed, WebhookResult

from tests.support.constants import STATE_TABLE, WEB, WEBHOOK_TOKEN
from tests.support.webhooks import Hook

HEADERS = {"authorization": f"Bearer {WEBHOOK_TOKEN}"}
RECORDS = 16  # more records waiting on the registry than the shared round trips have workers (8)
REPORTED_S = 30  # how long the records are waited for: far past the budget, short of the registry


@pytest.fixture
def hook(store: State, dynamodb: Any) -> Hook:
    return Hook(store, dynamodb, STATE_TABLE, index=True)


def test_records_waiting_on_a_silent_registry_are_all_reported_and_their_claims_released(hook: Hook) -> None:
    for n in range(RECORDS):  # one notification of the followed tag per delivery, as a registry sends
        body = json.dumps({"image": WEB, "id": f"silent-{n}"}).encode()
        assert hook.post("generic", HEADERS, body).status == 202
    bodies = hook.notifications.take()
    assert len(bodies) == RECORDS
    answering = threading.Event()
    resolve = hook.resolver.resolve

    def silent(ref: Any) -> Any:
        answering.wait(2 * REPORTED_S)  # it accepts the request and answers nothing
        return resolve(ref)

    hook.resolver.resolve = silent  # type: ignore[method-assign]
    batch = hook.service.batch(bodies, Budget(lambda: 1_300, 1_000))  # 0.3 s to wait for a registry
    pool = ThreadPoolExecutor(max_workers=RECORDS)  # the records side by side, as the handler checks them
    try:
        futures = [pool.submit(batch.check, body) for body in bodies]
        _done, waiting = wait(futures, timeout=REPORTED_S)
        assert not waiting, f"{len(waiting)} of {RECORDS} records still waiting once the budget was spent"
        outcomes = [f.exception() for f in futures]
    finally:
        answering.set()
        pool.shutdown(wait=True)
    for outcome in outcomes:
        assert isinstance(outcome, CheckFailed), outcome
        assert "did not answer within the invocation's time" in outcome.result.body["events"][0]["error"]
    assert hook.queue.sent == []
    # every claim was released: the records received again, once the registry answers, are checked
    # (not counted duplicates of themselves)
    hook.resolver.resolve = resolve  # type: ignore[method-assign]
    again = hook.service.batch(bodies)
    with ThreadPoolExecutor(max_workers=RECORDS) as checks:
        results = list(checks.map(again.check, bodies))
    assert all(isinstance(r, WebhookResult) and r.body["duplicates"] == 0 for r in results), results
    assert sum(r.body["accepted"] for r in results) == RECORDS
