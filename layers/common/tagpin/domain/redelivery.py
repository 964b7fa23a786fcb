"""When a failed queue record comes back: soon after a blip, later and later while the failure
lasts, so that an outage of half an hour dead-letters nothing and a short one costs seconds.

SQS makes a failed record visible again after its visibility timeout, which must be at least six
times the function's timeout (6 minutes here): a fixed delay far too long for a blip and too short
to outlast an outage within the receive count. The handlers set each failed record's visibility
from this schedule instead (``ChangeMessageVisibility``), by how often it was received. The
queue's ``maxReceiveCount`` (template.yaml) is ``RECEIVES``: the record is dead-lettered after the
last delay, some 35 minutes after its first failure (a change gets one more try 15 minutes
later, below). A record that can never succeed (not a valid message) comes back at once, so it
reaches the dead-letter queue in seconds.

A delayed verification is usually received once before it is due (the FIFO queue has no
per-message delay: the consumer hides it until ``due_at``); that receive counts too, so
``RECEIVES`` leaves room for it: a change gets one more late attempt, a verification the same
schedule shifted by one step.
"""

from __future__ import annotations

DELAYS_S = (5, 10, 20, 40, 80, 160, 300, 600, 900)
EARLY_RECEIVES = 1  # a delayed verification's receive before it is due
RECEIVES = len(DELAYS_S) + 1 + EARLY_RECEIVES  # the queue's maxReceiveCount
PERMANENT = 0  # no point waiting: straight back, to the dead-letter queue after RECEIVES


def redelivery_delay(receive_count: int) -> int:
    """Seconds before a record that failed on its ``receive_count``-th receive comes back."""
    return DELAYS_S[min(max(receive_count, 1), len(DELAYS_S)) - 1]
