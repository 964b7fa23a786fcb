"""The webhook's delivery log in memory (``tagpin.ports.webhooks.DeliveryLog``), kept in step with
``tagpin.adapters.dynamodb.deliveries.DeliveryStore``: tests/unit/test_delivery_claims.py runs the
same contract over both."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """One claim as the store keeps it: until when, and the queued message that made it (None: a
    check that was not queued, or a claim written before the message was kept)."""

    expires_at: int
    message: str | None


class MemoryDeliveryLog:
    def __init__(self) -> None:
        self.claims: dict[str, Claim] = {}
        self._lock = threading.Lock()  # one conditional write at a time, as DynamoDB's item

    def claim_delivery(self, key: str, now: int, expires_at: int, message: str | None = None) -> bool:
        with self._lock:
            held = self.claims.get(key)
            if held is not None and held.expires_at >= now and (message is None or held.message != message):
                return False
            self.claims[key] = Claim(expires_at, message)
            return True

    def release_delivery(self, key: str, now: int) -> None:
        with self._lock:
            held = self.claims.get(key)
            self.claims[key] = Claim(now - 1, None if held is None else held.message)
