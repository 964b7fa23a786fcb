"""The state table, low level: one conditional-write helper, batched reads and writes with retries,
one transaction of conditional writes (``transact``, its writes built by
``tagpin.adapters.dynamodb.transaction``), paged queries and the attribute codecs every
repository of ``tagpin.adapters.dynamodb`` shares.

``transact`` (TransactWriteItems) writes items that must land together or not at all (a target's
state and its history item); DynamoDB bills each item of a transaction twice (2 WRU a KB, where a
single write is 1), and IAM authorises each item as its single form (``dynamodb:UpdateItem``,
``dynamodb:PutItem`` on the table).

``client`` is a boto3 DynamoDB client (low level, no resource layer): attribute values are
DynamoDB's typed JSON (``{"S": ...}``, ``{"N": ...}``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

from botocore.exceptions import ClientError

from tagpin.adapters.dynamodb.transaction import TRANSIENT_CANCELLATIONS, cancellation_codes, expressed
from tagpin.domain.channels import FollowedKey
from tagpin.domain.refs import Digest

Item = dict[str, Any]
Key = dict[str, dict[str, str]]

# The key schema (docs/architecture.md has it as a table): partition key prefixes ...
TAG = "TAG#"  # + registry/repo:tag
TARGET = "TARGET#"  # + cluster/namespace/kind/name/container
IMAGE = "IMAGE#"  # + registry/repo:tag (its audit trail)
ROLLOUT = "ROLLOUT#"  # + registry/repo:tag (its promotion)
CLUSTER = "CLUSTER#"  # + cluster name
DELIVERY = "DELIVERY#"  # + sha256 of (source, delivery id, tag)
FOLLOW = "FOLLOW#"  # + shard (tagpin.domain.shards): the index, one partition per shard
IMAGES = "IMAGES#"  # + shard: the tags of the shard's index, and their targets per cluster (one item)
DIGESTS = "DIGESTS#"  # + shard: the settled digests, one item per shard
VERSIONS = "VERSIONS#"  # + registry/repository: its versions marked bad (version channels)
SESSION = "SESSION#"  # + sha256 of a console session id: that session was signed out
POLL = "POLL"
# ... and sort keys.
STATE = "STATE"  # the item that holds the state of its partition
HISTORY = "HIST#"  # + epoch ms (13 digits) + ...: audit-trail items
SLOTS = "SLOTS"
HOLDS = "HOLDS"  # / <target id>: one hint per target put on hold (what the holds view reads)
AWAITING = "AWAITING"  # / <image>: one hint per promotion waiting for a person's approval
CURSOR = "CURSOR"
BY_TARGET = "ByTarget"  # the global secondary index of the index entries by ``target_id`` (template.yaml)
DAY_S = 86400
TEXT_LIMIT = 1000  # characters kept of an error or a detail
BATCH_GET_KEYS = 100  # BatchGetItem's limit
BATCH_WRITE_ITEMS = 25  # BatchWriteItem's limit
RETRY_BASE_S = 0.05
RETRY_CAP_S = 2.0
RETRY_ATTEMPTS = 10


# DynamoDB's limits on a key's parts, in bytes of UTF-8: a longer one is a ValidationException on
# AWS (moto does not check them).
MAX_PARTITION_KEY = 2048
MAX_SORT_KEY = 1024


class UnprocessedError(RuntimeError):
    """DynamoDB kept returning unprocessed keys or items (throughput exceeded) after every retry."""


class KeyTooLong(Exception):
    """A key part longer than DynamoDB allows (or not UTF-8): refused before the request, named."""


def _checked(part: str, value: str, limit: int) -> str:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise KeyTooLong(f"a {part} key must be UTF-8 text") from None
    if size > limit:
        raise KeyTooLong(f"a {part} key is at most {limit:,} bytes; this one is {size:,} ({value[:60]!r}…)")
    return value


def key(pk: str, sk: str = STATE) -> Key:
    """The key of an item; ``KeyTooLong`` when a part is longer than DynamoDB allows."""
    return {
        "pk": {"S": _checked("partition", pk, MAX_PARTITION_KEY)},
        "sk": {"S": _checked("sort", sk, MAX_SORT_KEY)},
    }


def text(item: Item, name: str) -> str | None:
    value = item.get(name)
    return None if value is None else str(value.get("S", value.get("N")))


def followed_key(item: Item, name: str = "image") -> FollowedKey:
    """The followed tag or channel an item names. Read as stored: text another version wrote that
    is no key is shown as it is, never an error (the key is typed, not checked again)."""
    value = text(item, name) or ""
    try:
        return FollowedKey(value)
    except ValueError:
        return cast(FollowedKey, value)


def digest_at(item: Item, name: str = "digest") -> Digest:
    """The digest an item names, read as stored (as ``followed_key``)."""
    value = text(item, name) or ""
    try:
        return Digest(value)
    except ValueError:
        return cast(Digest, value)


def digest_if(item: Item, name: str) -> Digest | None:
    """``digest_at``, or None when the item has no such attribute."""
    return digest_at(item, name) if name in item else None


def number(item: Item, name: str) -> int | None:
    value = item.get(name)
    return None if value is None else int(value["N"])


def S(value: str, limit: int | None = None) -> dict[str, str]:
    return {"S": value if limit is None else value[:limit]}


def N(value: int) -> dict[str, str]:
    return {"N": str(value)}


def digest_prefix(digest: str) -> str:
    return digest.rsplit(":", maxsplit=1)[-1][:12]


def plain(item: Item) -> dict[str, str]:
    """An item's attributes as strings (for history entries)."""
    return {k: str(next(iter(v.values()))) for k, v in item.items()}


def _is_condition_failure(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


def _projection(attributes: list[str] | None) -> dict[str, Any]:
    """A request's ProjectionExpression reading only ``attributes`` (all when None)."""
    if not attributes:
        return {}
    return {
        "ProjectionExpression": ", ".join(f"#a{i}" for i in range(len(attributes))),
        "ExpressionAttributeNames": {f"#a{i}": name for i, name in enumerate(attributes)},
    }


class Table:
    def __init__(
        self,
        client: Any,
        name: str,
        retention_days: Callable[[], int] = lambda: 90,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.name = name
        self._retention_days = retention_days
        self._sleep = sleep

    def expires_at(self, now_ms: int) -> dict[str, str]:
        """The TTL attribute (epoch seconds) of a history item written at ``now_ms``."""
        return N(now_ms // 1000 + self._retention_days() * DAY_S)

    # -- single items -----------------------------------------------------------------------------
    def get(self, item_key: Key, *, consistent: bool = True) -> Item | None:
        found: Item | None = self.client.get_item(
            TableName=self.name, Key=item_key, ConsistentRead=consistent
        ).get("Item")
        return found

    def put(
        self,
        item: Item,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: Item | None = None,
    ) -> bool:
        """Write ``item``; False when ``condition`` did not hold (nothing written)."""
        request: dict[str, Any] = {"TableName": self.name, "Item": item}
        return self._conditional(self.client.put_item, request, condition, names, values) is not None

    def delete(
        self,
        item_key: Key,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: Item | None = None,
    ) -> bool:
        """Delete the item; False when ``condition`` did not hold (nothing deleted)."""
        request: dict[str, Any] = {"TableName": self.name, "Key": item_key}
        return self._conditional(self.client.delete_item, request, condition, names, values) is not None

    def update(
        self,
        item_key: Key,
        expression: str,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: Item | None = None,
        returns: str | None = None,
    ) -> Item | None:
        """Apply ``expression``; the attributes ``returns`` asks for (``{}`` when none), or None when
        ``condition`` did not hold (nothing written)."""
        request: dict[str, Any] = {"TableName": self.name, "Key": item_key, "UpdateExpression": expression}
        if returns is not None:
            request["ReturnValues"] = returns
        return self._conditional(self.client.update_item, request, condition, names, values)

    def _conditional(
        self,
        call: Callable[..., Any],
        request: dict[str, Any],
        condition: str | None,
        names: dict[str, str] | None,
        values: Item | None,
    ) -> Item | None:
        """The one place a conditional write's failure becomes an answer instead of an error."""
        expressed(request, condition, names, values)
        try:
            response = call(**request)
        except ClientError as exc:
            if condition is not None and _is_condition_failure(exc):
                return None
            raise
        attributes: Item = response.get("Attributes", {})
        return attributes

    def transact(self, writes: list[Item]) -> bool:
        """Every write of ``writes`` (``put_write``, ``update_write``) or none, in one
        TransactWriteItems; False when a write's condition did not hold (nothing written). Cancelled
        by a conflicting transaction or throttled: sent again after a capped, jittered exponential
        backoff (``UnprocessedError`` after ``RETRY_ATTEMPTS``)."""
        items = [{kind: {"TableName": self.name, **body}} for w in writes for kind, body in w.items()]
        for attempt in self._attempts():
            try:
                self.client.transact_write_items(TransactItems=items)
                return True
            except ClientError as exc:
                codes = cancellation_codes(exc)
                if "ConditionalCheckFailed" in codes:
                    return False
                if not TRANSIENT_CANCELLATIONS.intersection(codes):
                    raise
            self._backoff(attempt)
        raise AssertionError("unreachable: _backoff raises on the last attempt")  # pragma: no cover

    # -- many items -------------------------------------------------------------------------------
    def batch_get(
        self, keys: list[Key], *, consistent: bool, attributes: list[str] | None = None
    ) -> list[Item]:
        """Every item found (only its ``attributes`` if given), ``BATCH_GET_KEYS`` keys a call;
        unprocessed keys are asked again after a capped, jittered exponential backoff."""
        found: list[Item] = []
        for start in range(0, len(keys), BATCH_GET_KEYS):
            keys_of: Item = {"Keys": keys[start : start + BATCH_GET_KEYS], "ConsistentRead": consistent}
            request: Item = {self.name: keys_of | _projection(attributes)}
            for attempt in self._attempts():
                response = self.client.batch_get_item(RequestItems=request)
                found.extend(response.get("Responses", {}).get(self.name, []))
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                self._backoff(attempt)
        return found

    def batch_write(self, requests: list[Item]) -> None:
        """Put and delete requests, ``BATCH_WRITE_ITEMS`` a call; unprocessed ones retried as reads are."""
        for start in range(0, len(requests), BATCH_WRITE_ITEMS):
            pending: Item = {self.name: requests[start : start + BATCH_WRITE_ITEMS]}
            for attempt in self._attempts():
                pending = self.client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break
                self._backoff(attempt)

    def _attempts(self) -> Iterator[int]:
        yield from range(RETRY_ATTEMPTS)

    def _backoff(self, attempt: int) -> None:
        if attempt + 1 >= RETRY_ATTEMPTS:
            raise UnprocessedError(f"DynamoDB left items unprocessed after {RETRY_ATTEMPTS} attempts")
        self._sleep(random.uniform(0, min(RETRY_CAP_S, RETRY_BASE_S * 2**attempt)))  # noqa: S311 (jitter)

    def query(
        self,
        pk: str,
        *,
        prefix: str | None = None,
        newest_first: bool = False,
        limit: int | None = None,
        filter: str | None = None,
        attributes: list[str] | None = None,
        consistent: bool = False,
    ) -> list[Item]:
        """Items of partition ``pk`` (sort keys starting with ``prefix``, passing ``filter``, a
        FilterExpression without values): every page, or the first ``limit`` items; only their
        ``attributes`` if given."""
        condition = "pk = :pk"
        values: Item = {":pk": S(_checked("partition", pk, MAX_PARTITION_KEY))}
        if prefix is not None:
            condition += " AND begins_with(sk, :prefix)"
            values[":prefix"] = S(_checked("sort", prefix, MAX_SORT_KEY))
        request: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": not newest_first,
            "ConsistentRead": consistent,
        }
        if limit is not None:
            request["Limit"] = limit
        if filter is not None:
            request["FilterExpression"] = filter
        request |= _projection(attributes)
        return self._pages(request, limit)

    def query_index(self, index: str, attribute: str, value: str) -> list[Item]:
        """Every item of the global secondary index ``index`` whose partition key ``attribute`` is
        ``value`` (eventually consistent, as a global secondary index is)."""
        request: dict[str, Any] = {
            "TableName": self.name,
            "IndexName": index,
            "KeyConditionExpression": "#k = :k",
            "ExpressionAttributeNames": {"#k": attribute},
            "ExpressionAttributeValues": {":k": S(_checked("partition", value, MAX_PARTITION_KEY))},
        }
        return self._pages(request, None)

    def _pages(self, request: dict[str, Any], limit: int | None) -> list[Item]:
        items: list[Item] = []
        while True:
            response = self.client.query(**request)
            items.extend(response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if not last or (limit is not None and len(items) >= limit):
                return items[:limit] if limit is not None else items
            request["ExclusiveStartKey"] = last

    def query_page(
        self, pk: str, limit: int, after: str | None = None, attributes: list[str] | None = None
    ) -> tuple[list[Item], str | None]:
        """One page of partition ``pk`` in sort-key order: up to ``limit`` items after the sort key
        ``after`` (only their ``attributes`` if given), and the sort key to continue from (None: the
        partition has no more)."""
        request: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": S(_checked("partition", pk, MAX_PARTITION_KEY))},
            "Limit": limit,
            **_projection(attributes),
        }
        if after is not None:
            request["ExclusiveStartKey"] = key(pk, after)
        response = self.client.query(**request)
        last = response.get("LastEvaluatedKey")
        return response.get("Items", []), None if not last else str(last["sk"]["S"])
