"""moto's DynamoDB Query reads one partition, as DynamoDB does (a local-stack speed-up).

moto 5.2.5 sorts every item of the table on each Query (``Table.all_items``) and then keeps the
partition asked for: with 20,000 items a Query costs moto about 100 ms whatever it returns, and the
cost grows with the table, not with the answer. On the local stack every DynamoDB request holds
one lock (``moto_process.serialize_dynamodb``), so a Query's sort also delays every other
function's call. Here a Query of the table reads its partition only, and a Query of a global
secondary index the items whose index key is the one asked for (DynamoDB reads that partition of
the index). moto's own query then runs on those items: its conditions, its sort by the range key,
its pages, its projection; the answer is the one moto gives, found without the whole-table sort.

``install`` once per process (the stack's moto, in process or in its own); ``TAGPIN_LOCAL_MOTO_AS_IS=1``
leaves moto as it is (``bench/console.py --moto-as-is`` measures the difference).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

AS_IS = "TAGPIN_LOCAL_MOTO_AS_IS"

_scope = threading.local()  # the items the current thread's Query reads (set only during a Query)


def _partition(
    table: Any, hash_key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[[Any], list[Any]] | None:
    """What a Query reads of ``table``: the items of its partition, or None (moto's whole table)."""
    index = kwargs.get("index_name") or (args[6] if len(args) > 6 else None)
    if index:  # moto 5.2.5 passes the index's key as hash_key_conditions: [(attribute, value)]
        wanted = dict(kwargs.get("hash_key_conditions") or [])
        if not wanted:
            return None
        return lambda t: [
            item
            for items in t.items.values()
            for item in items.values()
            if all(name in item.attrs and item.attrs[name] == value for name, value in wanted.items())
        ]
    if hash_key is None or not table.range_key_attr:
        return None
    return lambda t: sorted(t.items.get(hash_key, {}).values(), key=lambda item: item.range_key)


def install() -> bool:
    """Make this process's moto read one partition per Query (once); False when left as it is."""
    if os.environ.get(AS_IS) == "1":
        return False
    from moto.dynamodb.models.table import Table

    if getattr(Table.query, "partitioned", False):
        return True
    query, all_items = Table.query, Table.all_items

    def partition_query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        _scope.read = _partition(self, hash_key, args, kwargs)
        try:
            return query(self, hash_key, *args, **kwargs)
        finally:
            _scope.read = None

    def partition_items(self: Any) -> list[Any]:
        read = getattr(_scope, "read", None)
        return all_items(self) if read is None else read(self)

    partition_query.partitioned = True  # type: ignore[attr-defined]
    partition_query.moto = (query, all_items)  # type: ignore[attr-defined]
    Table.query, Table.all_items = partition_query, partition_items  # type: ignore[method-assign]
    return True


@contextmanager
def as_is() -> Iterator[None]:
    """moto's own Query meanwhile, in this process (its answers are what ``install`` must keep)."""
    from moto.dynamodb.models.table import Table

    installed = Table.query, Table.all_items
    original = getattr(Table.query, "moto", None)
    if original is not None:
        Table.query, Table.all_items = original  # type: ignore[method-assign]
    try:
        yield
    finally:
        Table.query, Table.all_items = installed  # type: ignore[method-assign]
