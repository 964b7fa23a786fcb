"""moto's DynamoDB transactions keep the items they name, not whole tables (a local-stack speed-up).

moto 5.2.5's ``DynamoDBBackend.transact_write_items`` deep-copies every table a transaction names
before it writes (``copy.deepcopy(self.tables[table_name])``), to put the copy back when the
transaction is cancelled (``TransactionCanceledException``) or refused mid-way
(``MultipleTransactionsException``, ``MockValidationException``): about 5 ms per transaction with
100 items in the table, 40 ms with 1,000, 400 ms with 10,000, whatever the transaction writes. On
the local stack every DynamoDB request holds one lock (``moto_process.serialize_dynamodb``), so
the copy also delays every other function's call.

A transaction writes only the items it names (a Put the item's key, an Update or a Delete its
``Key``), and a table's other state (its item count, its indexes) is computed from its items. Here
those items are kept before moto's own ``transact_write_items`` runs (a deep copy of each, or
"absent"); meanwhile moto's ``copy.deepcopy`` of such a table gives a shallow copy (the same items,
cheap), and when moto puts that copy back (its rollback, taken exactly where moto takes it), the
table itself is put back with its named items as they were. The answer, the error and the table
afterwards are moto's. A table with a stream (its records are rolled back too), or an operation
whose key cannot be read as moto reads it, leaves moto's whole-table copy for that table.

``install`` once per process (the stack's moto, in process or in its own;
``TAGPIN_LOCAL_MOTO_AS_IS=1`` leaves moto as it is); ``as_is`` puts moto's own back meanwhile.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tagpin_local.moto_partitions import AS_IS

# (table, {(hash, range): (partition existed, the item's deep copy or None)}) per table name
Images = dict[str, tuple[Any, dict[tuple[Any, Any], tuple[bool, Any]]]]

_scope = threading.local()  # ids of the tables the current thread's transaction copies shallowly
_moto: dict[str, Any] = {}  # "transact_write_items", "copy": moto's own (for as_is)


class _Copy:
    """The ``copy`` module as moto's ``dynamodb.models`` sees it: ``deepcopy`` of a table the
    current transaction keeps by items is a shallow copy; everything else is ``copy``'s."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, x: Any, memo: dict[int, Any] | None = None) -> Any:
        if id(x) in (getattr(_scope, "tables", None) or ()):
            return copy.copy(x)
        return copy.deepcopy(x, memo)


def _slot(table: Any, key: Any) -> tuple[Any, Any]:
    """Where ``key`` (attribute -> typed value) puts an item in ``table.items``, as moto reads it;
    KeyError/TypeError/... when moto would not read it so (the caller then keeps the table)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_value = DynamoType(key[table.hash_key_attr])
    range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    return hash_value, range_value


def _images(backend: Any, transact_items: list[dict[str, Any]]) -> Images:
    """The items each named table's operations may write, as they are now (None: absent)."""
    images: Images = {}
    whole: set[str] = set()  # tables moto copies whole (a stream, a key not read as moto reads it)
    for transact_item in transact_items:
        if not isinstance(transact_item, dict) or len(transact_item) != 1:
            continue  # moto refuses it before or without writing (TransactWriteSingleOpException)
        _, op = next(iter(transact_item.items()))
        name = op.get("TableName") if isinstance(op, dict) else None
        if not isinstance(name, str) or name in whole or name not in backend.tables:
            continue
        table = backend.tables[name]
        try:
            if table.stream_shard is not None:
                raise LookupError(name)
            hash_value, range_value = _slot(table, op["Item"] if "Item" in op else op["Key"])
        except Exception:  # any key moto might read otherwise: moto's own copy of the table
            whole.add(name)
            images.pop(name, None)
            continue
        kept = images.setdefault(name, (table, {}))[1]
        if (hash_value, range_value) not in kept:
            partition = table.items.get(hash_value)
            item = partition
            if range_value is not None and partition is not None:
                item = partition.get(range_value)
            kept[(hash_value, range_value)] = (partition is not None, copy.deepcopy(item))
    return images


def _restore(table: Any, kept: dict[tuple[Any, Any], tuple[bool, Any]]) -> None:
    """Put ``table``'s named items back as they were (and drop a partition moto's reads made)."""
    for (hash_value, range_value), (existed, item) in kept.items():
        if range_value is None:
            if item is None:
                table.items.pop(hash_value, None)
            else:
                table.items[hash_value] = item
            continue
        if item is not None:
            table.items[hash_value][range_value] = item
        elif hash_value in table.items:
            table.items[hash_value].pop(range_value, None)
        if not existed and hash_value in table.items and not table.items[hash_value]:
            del table.items[hash_value]


def install() -> bool:
    """Make this process's moto keep a transaction's items, not its tables (once); False when
    left as it is (``TAGPIN_LOCAL_MOTO_AS_IS=1``, as :mod:`.moto_partitions`)."""
    from moto.dynamodb import models
    from moto.dynamodb.models import DynamoDBBackend

    if os.environ.get(AS_IS) == "1":
        return False
    if _moto:
        return True
    transact_write_items = DynamoDBBackend.transact_write_items

    def keep_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        images = _images(self, transact_items)
        _scope.tables = {id(table) for table, _ in images.values()}
        try:
            transact_write_items(self, transact_items)
        finally:
            _scope.tables = None
            for name, (table, kept) in images.items():
                if self.tables.get(name) is not table:  # moto put its copy back: rolled back
                    self.tables[name] = table
                    _restore(table, kept)

    _moto.update(transact_write_items=transact_write_items, copy=vars(models)["copy"])
    DynamoDBBackend.transact_write_items = keep_items  # type: ignore[method-assign]
    setattr(models, "copy", _Copy())  # noqa: B010 (moto's module does not export its name)
    return True


@contextmanager
def as_is() -> Iterator[None]:
    """moto's own transactions meanwhile, in this process (their answers are what ``install``
    must keep)."""
    from moto.dynamodb import models
    from moto.dynamodb.models import DynamoDBBackend

    installed = DynamoDBBackend.transact_write_items, vars(models)["copy"]
    if _moto:
        DynamoDBBackend.transact_write_items = _moto["transact_write_items"]  # type: ignore[method-assign]
        setattr(models, "copy", _moto["copy"])  # noqa: B010
    try:
        yield
    finally:
        DynamoDBBackend.transact_write_items = installed[0]  # type: ignore[method-assign]
        setattr(models, "copy", installed[1])  # noqa: B010
