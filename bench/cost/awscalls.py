"""Count: every AWS API call made in this process, with the DynamoDB request units it consumed.

A measurement-only wrapper around botocore's ``BaseClient._make_api_call`` (installed by the
bench, nothing in production code): DynamoDB by operation with read/write request units computed
from consistency and item sizes, SQS, SSM, Secrets Manager, STS/EKS.
"""

from __future__ import annotations

import collections
import math
import threading
from typing import Any

import botocore.client
import botocore.exceptions


def _attr_size(value: dict[str, Any]) -> int:
    """DynamoDB's size of one attribute value (bytes), as its pricing counts it."""
    (kind, v), *_ = value.items()
    if kind == "S":
        return len(str(v).encode())
    if kind == "N":
        return len(str(v).lstrip("-").replace(".", "").lstrip("0")) // 2 + 2
    if kind == "B":
        return len(v) if isinstance(v, bytes) else len(str(v))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(x)) for x in v)
    if kind == "L":
        return 3 + sum(_attr_size(x) + 1 for x in v)
    if kind == "M":
        return 3 + sum(len(k) + _attr_size(x) + 1 for k, x in v.items())
    return 0


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + _attr_size(value) for name, value in item.items())


def read_units(size: int, consistent: bool) -> float:
    return max(1, math.ceil(size / 4096)) * (1.0 if consistent else 0.5)


def write_units(size: int) -> float:
    return float(max(1, math.ceil(size / 1024)))


SQS_CHUNK = 64 * 1024  # https://aws.amazon.com/sqs/pricing/ : each 64 KB chunk of a payload is one request


def _message_bytes(message: dict[str, Any]) -> int:
    """A message's payload as SQS counts it: the body and its attributes' names, types and values."""
    size = len(str(message.get("MessageBody") or message.get("Body") or "").encode())
    for name, attribute in (message.get("MessageAttributes") or {}).items():
        value = attribute.get("StringValue") or attribute.get("BinaryValue") or b""
        size += len(name.encode()) + len(str(attribute.get("DataType", "")).encode())
        size += len(value) if isinstance(value, bytes) else len(str(value).encode())
    return size


INDEXED = "target_id"  # the state table's ``ByTarget`` index projects the items that carry it


def billed_write_units(item: dict[str, Any]) -> float:
    """A write of ``item``: 1 WRU a KB, and once more in the ``ByTarget`` index when it projects it."""
    return write_units(item_size(item)) * (2 if INDEXED in item else 1)


def _whole(params: dict[str, Any]) -> bool:
    """Whether an update's answer carries the whole item (else ``settle`` reads it afterwards)."""
    return params.get("ReturnValues") in ("ALL_NEW", "ALL_OLD")


def sqs_billed_requests(operation: str, params: dict[str, Any], response: dict[str, Any] | None) -> int:
    """The requests SQS bills for one call: one, or one per 64 KB chunk of the payload it carries
    (the messages sent, or those received)."""
    if operation == "SendMessage":
        size = _message_bytes(params)
    elif operation == "SendMessageBatch":
        size = sum(_message_bytes(entry) for entry in params.get("Entries", []))
    elif operation == "ReceiveMessage":
        size = sum(_message_bytes(m) for m in (response or {}).get("Messages", []))
    else:
        size = 0
    return max(1, math.ceil(size / SQS_CHUNK))


def queue_name(params: dict[str, Any]) -> str:
    """The queue a call went to, by name (a FIFO queue's ends in ``.fifo``: SQS requires it)."""
    return str(params.get("QueueUrl") or params.get("QueueName") or "?").rstrip("/").rsplit("/", 1)[-1]


class AwsCalls:
    """Every boto3 call made in this process while active: by service and operation, with the
    DynamoDB request units each consumed (from consistency and item sizes; an update is billed on
    the larger of the old and new item, both under 1 KB here, so 1 WRU; a failed conditional write
    still costs its WRU), and the SQS requests each call is billed as, by queue (``sqs``: queue name
    -> operation -> billed requests)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.sqs: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.rru = 0.0
        self.wru = 0.0
        self.by_table: collections.Counter[str] = collections.Counter()
        self.active = False
        self._lock = threading.Lock()
        self._original: Any = None
        # updates whose response did not carry the whole item: sized after the operation (``settle``)
        self._unsized: list[tuple[Any, dict[str, Any]]] = []

    def install(self) -> None:
        original = botocore.client.BaseClient._make_api_call
        counter = self

        def counted(client: Any, operation: str, params: dict[str, Any]) -> Any:
            service = client.meta.service_model.service_name
            if counter.active and service == "dynamodb" and operation == "UpdateItem" and not _whole(params):
                with counter._lock:
                    counter._unsized.append((client, params))
            try:
                response = original(client, operation, params)
            except botocore.exceptions.ClientError as exc:
                counter.record(service, operation, params, None, exc)
                raise
            counter.record(service, operation, params, response, None)
            return response

        self._original = original
        setattr(botocore.client.BaseClient, "_make_api_call", counted)  # noqa: B010 (measurement wrapper)

    def uninstall(self) -> None:
        if self._original is not None:
            setattr(botocore.client.BaseClient, "_make_api_call", self._original)  # noqa: B010

    def settle(self) -> None:
        """Size the updates whose answer did not carry the item (``ReturnValues`` none or partial):
        DynamoDB bills an update on the larger of the item before and after (1 WRU a KB), and a
        write of an item in a global secondary index (the state table's ``ByTarget``: the items
        with a ``target_id``, projected whole) once more there. Read after the measured operation,
        uncounted and outside the invocations' time: the item as it is then (the size after)."""
        with self._lock:
            unsized, self._unsized = self._unsized, []
        extra = 0.0
        for client, params in unsized:
            got = client.get_item(TableName=params["TableName"], Key=params["Key"], ConsistentRead=True)
            item = got.get("Item") or {}
            extra += billed_write_units(item) - 1.0  # counted 1 when made
        with self._lock:
            self.wru += extra

    def reset(self) -> None:
        with self._lock:
            self._unsized.clear()
            self.counts.clear()
            self.sqs.clear()
            self.by_table.clear()
            self.rru = self.wru = 0.0

    def record(
        self, service: str, operation: str, params: dict[str, Any], response: Any, error: Exception | None
    ) -> None:
        if not self.active:
            return
        rru, wru = 0.0, 0.0
        if service == "dynamodb":
            rru, wru = self._units(operation, params, response or {})
        with self._lock:
            self.counts[f"{service}:{operation}"] += 1
            if service == "sqs":
                self.sqs[queue_name(params)][operation] += sqs_billed_requests(operation, params, response)
            self.rru += rru
            self.wru += wru
            table = params.get("TableName") or next(iter(params.get("RequestItems") or {"?": 0}))
            self.by_table[f"{table}:rru"] += rru  # type: ignore[assignment]
            self.by_table[f"{table}:wru"] += wru  # type: ignore[assignment]

    @staticmethod
    def _units(operation: str, params: dict[str, Any], response: dict[str, Any]) -> tuple[float, float]:
        consistent = bool(params.get("ConsistentRead"))
        if operation == "GetItem":
            return read_units(item_size(response.get("Item") or {}), consistent), 0.0
        if operation == "BatchGetItem":
            rru = 0.0
            for table, request in params["RequestItems"].items():
                found = response.get("Responses", {}).get(table, [])
                unprocessed = len((response.get("UnprocessedKeys") or {}).get(table, {}).get("Keys", []))
                strong = bool(request.get("ConsistentRead"))
                rru += sum(read_units(item_size(i), strong) for i in found)
                missing = len(request["Keys"]) - len(found) - unprocessed
                rru += missing * read_units(0, strong)
            return rru, 0.0
        if operation in ("Query", "Scan"):
            size = sum(item_size(i) for i in response.get("Items", []))
            return read_units(size, consistent), 0.0
        if operation == "PutItem":  # and once more in the ByTarget index for an item it projects
            return 0.0, billed_write_units(params["Item"])
        if operation == "UpdateItem" and not _whole(params):  # 1 for now; ``settle`` sizes it
            return 0.0, 1.0
        if operation in ("UpdateItem", "DeleteItem"):
            return 0.0, billed_write_units(response.get("Attributes") or {})
        if operation == "BatchWriteItem":
            wru = 0.0
            for requests in params["RequestItems"].values():
                for r in requests:
                    if "PutRequest" in r:
                        wru += billed_write_units(r["PutRequest"]["Item"])
                    else:
                        wru += 1.0
            return 0.0, wru
        if operation == "TransactWriteItems":
            return 0.0, 2.0 * len(params["TransactItems"])
        if operation == "TransactGetItems":
            return 2.0 * len(params["TransactItems"]), 0.0
        return 0.0, 0.0
