"""``DELIVERY#<sha256 of source, delivery id, tag>`` / ``STATE``: webhook delivery ids already
handled, one conditional put per (source, id, tag) (``tagpin.ports.webhooks.DeliveryLog``).

Attributes: ``claimed_at``, ``expires_at`` (epoch seconds), ``message_id`` (the SQS message id of
the queued notification that claimed it; absent from claims written before it was kept, and from
checks that were not queued: such a claim is held against every message). The table's TTL on
``expires_at`` removes old items; TTL deletion runs late (up to days), so the condition treats an
expired item as absent. Written and read by the webhook only.
"""

from __future__ import annotations

from typing import Any

from tagpin.adapters.dynamodb.table import DELIVERY, N, S, Table, key


class DeliveryStore:
    def __init__(self, client: Any, table: str) -> None:
        self._table = Table(client, table)

    def claim_delivery(self, delivery: str, now: int, expires_at: int, message: str | None = None) -> bool:
        """True the first time ``delivery`` is claimed (or once its claim expired), or when
        ``message`` holds it already (one queued message received again); False otherwise."""
        item = {**key(DELIVERY + delivery), "expires_at": N(expires_at), "claimed_at": N(now)}
        condition, values = "attribute_not_exists(pk) OR expires_at < :now", {":now": N(now)}
        if message is not None:
            item["message_id"] = S(message)
            condition, values = f"{condition} OR message_id = :message", {**values, ":message": S(message)}
        return self._table.put(item, condition=condition, values=values)

    def release_delivery(self, delivery: str, now: int) -> None:
        """Expire the claim now (an update, not a delete: producers never delete state). ``now``,
        not 0: DynamoDB's TTL never deletes items whose time is more than five years past."""
        self._table.update(key(DELIVERY + delivery), "SET expires_at = :now", values={":now": N(now - 1)})
