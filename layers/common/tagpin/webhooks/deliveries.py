"""Delivery ids already handled, in the state table: one conditional put per (source, id, tag).

Item: ``pk = DELIVERY#<sha256 of source, id, tag>``, ``sk = STATE``, ``expires_at`` (epoch
seconds). The table's TTL on ``expires_at`` removes old items; TTL deletion runs late (up to
days), so the condition treats an expired item as absent.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

DELIVERY = "DELIVERY#"
STATE = "STATE"


class DeliveryStore:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def _key(self, key: str) -> dict[str, Any]:
        return {"pk": {"S": DELIVERY + key}, "sk": {"S": STATE}}

    def claim_delivery(self, key: str, now: int, expires_at: int) -> bool:
        """True the first time ``key`` is claimed (or once its claim expired); False otherwise."""
        try:
            self._db.put_item(
                TableName=self._table,
                Item={**self._key(key), "expires_at": {"N": str(expires_at)}, "claimed_at": {"N": str(now)}},
                ConditionExpression="attribute_not_exists(pk) OR expires_at < :now",
                ExpressionAttributeValues={":now": {"N": str(now)}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def release_delivery(self, key: str) -> None:
        """Expire the claim now (an update, not a delete: producers never delete state)."""
        self._db.update_item(
            TableName=self._table,
            Key=self._key(key),
            UpdateExpression="SET expires_at = :zero",
            ExpressionAttributeValues={":zero": {"N": "0"}},
        )
