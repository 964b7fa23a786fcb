"""A notification of one followed tag, checked in a batch of its own (a single push, the usual
case): its targets' states are read beside its record's write, not before it, so the read is no
round trip of its own on the push's way to the changes queue; a batch of several followed tags
still reads them once for all (``test_webhook_batch``)."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

import pytest
from tagpin.ports.state import State

from tests.support.constants import STATE_TABLE, WEB, WEBHOOK_TOKEN
from tests.support.webhooks import Hook

HEADERS = {"authorization": f"Bearer {WEBHOOK_TOKEN}"}


class Meeting:
    """A repository whose ``method`` waits, before it runs, for the other side of ``barrier``."""

    def __init__(self, inner: object, method: str, barrier: threading.Barrier) -> None:
        self._inner, self._method, self._barrier = inner, method, barrier

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._inner, attribute)
        if attribute != self._method:
            return value

        def met(*args: Any, **kwargs: Any) -> Any:
            self._barrier.wait()  # broken (raises) when the other call is not under way meanwhile
            return value(*args, **kwargs)

        return met


@pytest.fixture
def hook(store: State, dynamodb: Any) -> Hook:
    return Hook(store, dynamodb, STATE_TABLE, index=True)


def test_one_tags_targets_are_read_while_its_record_is_written(hook: Hook) -> None:
    assert hook.post("generic", HEADERS, json.dumps({"image": WEB, "id": "one"}).encode()).status == 202
    (body,) = hook.notifications.take()
    meeting = threading.Barrier(2, timeout=30)
    met = replace(  # the read and the write meet, or each fails
        hook.store,
        targets=Meeting(hook.store.targets, "get_many", meeting),
        tags=Meeting(hook.store.tags, "record", meeting),
    )
    hook.detector = hook.detector_over(met)
    result = hook.service.batch([body]).check(body)
    assert (result.body["accepted"], result.body["ignored"], result.body["duplicates"]) == (1, 0, 0)
    assert [c.move.image for c in hook.queue.sent] == [WEB]
