"""Three lookups of moto's server made cheaper (a local-stack speed-up: no answer changes).

Outside DynamoDB's lock (``moto_process.serialize_dynamodb``), a storm's SQS requests cost moto's
process 2-6 ms of CPU each (2,000 recorded requests of a storm, replayed serially through its WSGI
app and profiled), most of it in two places:

* ``camelcase_to_underscores`` (``moto.core.utils``), a character loop calling ``istitle`` twice
  a character: once per request for its action (``BaseResponse.call_action``), and for each of an
  SQS queue's 22 attributes every time moto builds them (``Queue.attributes``, 4 times per
  SendMessage to a FIFO queue). Its answer depends on its argument only (a handful of names): here
  it is remembered per name (``functools.lru_cache``) in the modules that call it per request.
* ``SQSBackend.is_message_valid_based_on_retention_period``, asked for each message of a queue a
  ReceiveMessage walks, builds all of the queue's attributes three times
  (``get_queue_attributes(queue, ["MessageRetentionPeriod"])``), each counting the queue's messages
  (visible, in flight, delayed): quadratic in the queue's length. Here it reads the one attribute
  it needs (``Queue.message_retention_period``, the value ``Queue.attributes`` reports).
* SQS's clock (``unix_time``, ``unix_time_millis`` in ``moto.sqs.models``): moto reads it through
  two ``datetime`` objects and a subtraction (about 1.5 us), twice per message each time it counts
  a queue's messages (``Message.visible``, ``delayed``: every ``Queue.attributes`` build, 4 per
  SendMessage to a FIFO queue). Here the same clock (seconds since the epoch, UTC) is read from
  ``time.time`` directly.

``install`` once per process (the stack's moto, in process or in its own;
``TAGPIN_LOCAL_MOTO_AS_IS=1`` leaves moto as it is); ``as_is`` puts moto's own back meanwhile.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tagpin_local.moto_partitions import AS_IS

NAMES_KEPT = 4096  # camelcase_to_underscores' answers remembered (moto asks for a few dozen)
_moto: dict[tuple[Any, str], tuple[Any, Any]] = {}  # (owner, name) -> (moto's, ours): for as_is


def _retention_ok(self: Any, queue_name: str, message: Any) -> bool:
    """``SQSBackend.is_message_valid_based_on_retention_period``: the queue's retention period read
    as its attributes report it, without building them (the same answer, the same error for a
    queue that does not exist)."""
    retention_period = self.get_queue(queue_name).message_retention_period
    retain_until = retention_period + message.sent_timestamp / 1000
    return bool(retain_until > _unix_time())


def _unix_time(dt: Any = None) -> float:
    """``moto.core.utils.unix_time``: the seconds since the epoch of ``dt`` (a naive UTC datetime),
    now when none is given, read from ``time.time`` (moto reads the same clock by ``datetime``)."""
    if dt is not None:
        from moto.core.utils import unix_time

        return unix_time(dt)
    return time.time()


def _unix_time_millis(dt: Any = None) -> float:
    """``moto.core.utils.unix_time_millis``: ``_unix_time`` in milliseconds."""
    return _unix_time(dt) * 1000.0


def _targets() -> list[tuple[Any, str]]:
    """Where moto calls ``camelcase_to_underscores`` per request: each module's own name for it."""
    from moto.core import responses
    from moto.sns import models as sns_models
    from moto.sns import responses as sns_responses
    from moto.sqs import models as sqs_models

    modules = (responses, sqs_models, sns_models, sns_responses)
    return [(module, "camelcase_to_underscores") for module in modules]


def install() -> bool:
    """moto's lookups made cheaper in this process (once per process); False when left as it is
    (``TAGPIN_LOCAL_MOTO_AS_IS=1``, as :mod:`.moto_partitions`)."""
    from moto.core.utils import camelcase_to_underscores
    from moto.sqs import models as sqs_models
    from moto.sqs.models import SQSBackend

    if os.environ.get(AS_IS) == "1":
        return False
    if _moto:
        return True
    remembered = functools.lru_cache(maxsize=NAMES_KEPT)(camelcase_to_underscores)
    replaced: list[tuple[Any, str, Any]] = [(owner, name, remembered) for owner, name in _targets()]
    replaced.append((SQSBackend, "is_message_valid_based_on_retention_period", _retention_ok))
    replaced += [(sqs_models, "unix_time", _unix_time), (sqs_models, "unix_time_millis", _unix_time_millis)]
    for owner, name, new in replaced:
        _moto[(owner, name)] = vars(owner)[name], new
        setattr(owner, name, new)
    return True


@contextmanager
def as_is() -> Iterator[None]:
    """moto's own lookups meanwhile, in this process (their answers are what ``install`` keeps)."""
    for (owner, name), (original, _new) in _moto.items():
        setattr(owner, name, original)
    try:
        yield
    finally:
        for (owner, name), (_original, new) in _moto.items():
            setattr(owner, name, new)
