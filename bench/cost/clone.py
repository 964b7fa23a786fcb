"""Drive: write the same state for many tags or targets as the real repositories write it, fast.

``Cloner.run(seed, names)`` calls ``seed(0)`` and ``seed(1)`` (the real repository calls for the
first two) and reads back the items at the keys each wrote to (its requests, seen on the client).
Each item is either its own (a key that names it: ``names[i]``) or shared with others (a key that
does not: the settled-digest item of its shard, which every tag of the shard writes an entry of its
own to; ``shared_key(i)`` says which item that is for the i-th).

It checks that the first's own items, with the first's names replaced by the second's, are exactly
the second's own items, and that the entries the first wrote to its shared item (the attributes
named by it), renamed so, are exactly those the second wrote to its own shared item, at the key
``shared_key(1)`` says, and that a shared item holds nothing but such entries. Then the first's
items, with each other one's names put in, are written in batches of 25 (BatchWriteItem), and each
shared item once with every one's entries merged into what it already held (PutItem). Should a
check fail (an item or attribute every call changes, a key derived from a name that ``shared_key``
does not give, a value that differs), every other one goes through ``seed``, as before, and the
bench prints why. Setup only: nothing measured runs meanwhile.
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
type Key = tuple[str, str]


def _key(item: Item) -> Key:
    return item["pk"]["S"], item["sk"]["S"]


def _names(item: Item, names: Sequence[str]) -> bool:
    """Whether an item's key names the one that wrote it (its own item)."""
    pk, sk = _key(item)
    return any(name in pk or name in sk for name in names)


def _entries(item: Item, names: Sequence[str]) -> Item:
    """The attributes of a shared item that ``names`` name (the entries of that one)."""
    return {k: v for k, v in item.items() if k not in ("pk", "sk") and any(name in k for name in names)}


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


def _written_keys(operation: str, params: dict[str, Any]) -> list[Key]:
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
        keys: list[Key] = []

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

    def run(
        self,
        seed: Callable[[int], Any],
        names: Sequence[Sequence[str]],
        shared_key: Callable[[int], Key] | None = None,
    ) -> None:
        """``names[i]``: the strings that name the i-th one in what it writes (longest first);
        ``shared_key(i)``: the key of the item it shares with others (None: it shares none)."""
        if len(names) < 3:
            for i in range(len(names)):
                seed(i)
            return
        first, second = self._written(seed, 0), self._written(seed, 1)
        why = self._differs(first, second, names, shared_key)
        if why:
            print(
                f"setup: the {self.what} written for one are not those of another with its names "
                f"({why}): all {len(names)} through the real calls",
                file=sys.stderr,
                flush=True,
            )
            with ThreadPoolExecutor(WRITERS) as pool:
                list(pool.map(seed, range(2, len(names))))
            return
        own = [item for item in first if _names(item, names[0])]
        items = [substitute(item, self._pairs(names, i)) for i in range(2, len(names)) for item in own]
        batches = [items[b : b + BATCH] for b in range(0, len(items), BATCH)]
        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(self._write, batches))
        entries = [_entries(item, names[0]) for item in first if not _names(item, names[0])]
        if entries and shared_key is not None:
            merged: dict[Key, Item] = {}
            for i in range(2, len(names)):
                pairs = self._pairs(names, i)
                into = merged.setdefault(shared_key(i), {})
                into.update({substitute(k, pairs): substitute(v, pairs) for k, v in entries[0].items()})
            with ThreadPoolExecutor(WRITERS) as pool:
                list(pool.map(self._merge, merged.items()))
        self.cloned = True

    def _differs(
        self,
        first: list[Item],
        second: list[Item],
        names: Sequence[Sequence[str]],
        shared_key: Callable[[int], Key] | None,
    ) -> str:
        """Why the copy of the first's items made for the second is not what it wrote ("": it is)."""
        own = [item for item in first if _names(item, names[0])]
        pairs = self._pairs(names, 1)
        expected = sorted((substitute(item, pairs) for item in own), key=_key)
        if not own or expected != [item for item in second if _names(item, names[1])]:
            return f"{len(first)} and {len(second)} items"
        shared = [
            [item for item in items if not _names(item, names[i])] for i, items in enumerate((first, second))
        ]
        if not shared[0] and not shared[1]:
            return ""
        if shared_key is None or any(len(items) != 1 for items in shared):
            return "items shared with others" + (" in unknown places" if shared_key is None else "")
        if [_key(shared[0][0]), _key(shared[1][0])] != [shared_key(0), shared_key(1)]:
            return "a shared item not where shared_key says"
        for item in (shared[0][0], shared[1][0]):  # nothing in it but entries of the two
            if set(item) - {"pk", "sk"} != set(_entries(item, names[0])) | set(_entries(item, names[1])):
                return "an attribute of a shared item that names neither"
        entries = _entries(shared[0][0], names[0])
        renamed = {substitute(k, pairs): substitute(v, pairs) for k, v in entries.items()}
        if not entries or renamed != _entries(shared[1][0], names[1]):
            return "entries of a shared item"
        return ""

    def _merge(self, shared: tuple[Key, Item]) -> None:
        """One shared item with the entries put in, over what it held (one PutItem)."""
        (pk, sk), entries = shared
        key = {"pk": {"S": pk}, "sk": {"S": sk}}
        held = self.db.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item") or key
        self.db.put_item(TableName=TABLE, Item={**held, **entries})

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
