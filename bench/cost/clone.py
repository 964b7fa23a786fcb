"""Drive: write the same state for many tags or targets as the real repositories write it, fast.

``Cloner.run(seed, names)`` calls ``seed(0)`` and ``seed(1)`` (the real repository calls for the
first two), reads back the items at the keys each wrote to (its requests, seen on the client), and
checks that the items written for the
first, with the first's names (``names[0]``) replaced by the second's (``names[1]``), are exactly
the items written for the second. Then the first's items, with each other one's names put in, are
written in batches of 25 (BatchWriteItem). Should the check fail (an item shared between them, a
key derived from a name by a hash, a value that differs), every other one goes through ``seed``,
as before, and the bench prints why. Setup only: nothing measured runs meanwhile.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

TABLE = "tagpin-state"
BATCH = 25
WRITERS = 4

type Item = dict[str, Any]


def _key(item: Item) -> tuple[str, str]:
    return item["pk"]["S"], item["sk"]["S"]


def substitute(value: Any, names: Sequence[tuple[str, str]]) -> Any:
    """``value`` (a DynamoDB item or attribute value) with each old name replaced by its new one."""
    if isinstance(value, str):
        for old, new in names:
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {k: substitute(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, names) for v in value]
    return value


def _written_keys(operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """The keys of the state table's items a DynamoDB request writes (none for a read)."""
    if params.get("TableName", TABLE) != TABLE:
        return []
    if operation == "PutItem":
        return [_key(params["Item"])]
    if operation in ("UpdateItem", "DeleteItem"):
        return [_key(params["Key"])]
    if operation == "BatchWriteItem":
        requests = params["RequestItems"].get(TABLE, [])
        return [
            _key(r["PutRequest"]["Item"] if "PutRequest" in r else r["DeleteRequest"]["Key"])
            for r in requests
        ]
    if operation == "TransactWriteItems":
        found = []
        for t in params["TransactItems"]:
            ((kind, request),) = t.items()
            if kind != "ConditionCheck" and request.get("TableName") == TABLE:
                found.append(_key(request.get("Item") or request["Key"]))
        return found
    return []


class Cloner:
    def __init__(self, stack: Any, what: str) -> None:
        self.db = stack.client("dynamodb")
        self.what = what
        self.cloned = False

    def _written(self, seed: Callable[[int], Any], i: int) -> list[Item]:
        """The items at the keys ``seed(i)`` wrote to (its requests seen on the client), read back."""
        keys: list[tuple[str, str]] = []

        def note(params: dict[str, Any], model: Any, **_: Any) -> None:
            keys.extend(_written_keys(model.name, params))

        hook = f"cost-clone-{id(self)}"
        self.db.meta.events.register("provide-client-params.dynamodb.*", note, unique_id=hook)
        try:
            seed(i)
        finally:
            self.db.meta.events.unregister("provide-client-params.dynamodb.*", unique_id=hook)
        found = []
        for pk, sk in dict.fromkeys(keys):
            got = self.db.get_item(
                TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
            )
            if "Item" in got:
                found.append(got["Item"])
        return sorted(found, key=_key)

    def run(self, seed: Callable[[int], Any], names: Sequence[Sequence[str]]) -> None:
        """``names[i]``: the strings that name the i-th one in what it writes (longest first)."""
        if len(names) < 3:
            for i in range(len(names)):
                seed(i)
            return
        first, second = self._written(seed, 0), self._written(seed, 1)
        expected = sorted((substitute(item, self._pairs(names, 1)) for item in first), key=_key)
        if not first or expected != second:
            print(
                f"setup: the {self.what} written for one are not those of another with its names "
                f"({len(first)} and {len(second)} items): all {len(names)} through the real calls",
                file=sys.stderr,
                flush=True,
            )
            with ThreadPoolExecutor(WRITERS) as pool:
                list(pool.map(seed, range(2, len(names))))
            return
        items = [substitute(item, self._pairs(names, i)) for i in range(2, len(names)) for item in first]
        batches = [items[b : b + BATCH] for b in range(0, len(items), BATCH)]
        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(self._write, batches))
        self.cloned = True

    @staticmethod
    def _pairs(names: Sequence[Sequence[str]], i: int) -> list[tuple[str, str]]:
        pairs = list(zip(names[0], names[i], strict=True))
        return sorted(pairs, key=lambda pair: -len(pair[0]))

    def _write(self, batch: list[Item]) -> None:
        pending: dict[str, Any] = {TABLE: [{"PutRequest": {"Item": item}} for item in batch]}
        for attempt in range(10):
            pending = self.db.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                return
            time.sleep(0.05 * 2**attempt)
        raise RuntimeError(f"setup: {self.what}: items left unwritten after 10 attempts")
