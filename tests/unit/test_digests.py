"""The settled digests' layout in the state table (moto): one string per tag, the layout before
(a map ``{d, t}`` per tag, which stacks deployed earlier have) read too, and the cache's rule (an
older settle never lands over a later move) kept across both layouts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tagpin.adapters.dynamodb.digests import ENTRY, digest_key, tombstone
from tagpin.adapters.dynamodb.table import Table
from tagpin.ports.state import State

IMAGE = "registry-a.example/team/app:stable"


def digest(n: int) -> str:
    return f"sha256:{n:064x}"


def table_of(store: State) -> Table:
    table: Table = store.tags._table  # type: ignore[attr-defined]
    return table


def item(store: State) -> dict[str, Any]:
    found = table_of(store).get(digest_key(IMAGE))
    return {k: v for k, v in (found or {}).items() if k not in ("pk", "sk")}


def old_entry(store: State, t: int, d: str | None) -> None:
    """An entry as the version before wrote it: a map under the tag's own name."""
    value: dict[str, Any] = {"t": {"N": str(t)}} | ({"d": {"S": d}} if d else {})
    table_of(store).update(digest_key(IMAGE), "SET #i = :v", names={"#i": IMAGE}, values={":v": {"M": value}})


def test_an_entry_is_one_string_whose_time_orders_as_text(store: State) -> None:
    assert store.digests.settle(IMAGE, digest(1), 1_764_000_000_000)
    assert item(store) == {ENTRY + IMAGE: {"S": f"1764000000000 {digest(1)}"}}
    tombstone(table_of(store), IMAGE, 1_764_000_000_001)
    assert item(store) == {ENTRY + IMAGE: {"S": "1764000000001"}}
    assert store.digests.all() == {}
    assert not store.digests.settle(IMAGE, digest(1), 999)  # fewer digits: still older
    assert store.digests.settle(IMAGE, digest(2), 1_764_000_000_001)  # the move it read
    assert store.digests.all() == {IMAGE: digest(2)}
    with pytest.raises(ValueError, match="epoch milliseconds"):
        store.digests.settle(IMAGE, digest(2), 10**13)


def test_the_layout_before_is_read_and_replaced_by_the_next_write(store: State) -> None:
    old_entry(store, 10, digest(1))
    assert store.digests.all() == {IMAGE: digest(1)}
    assert not store.digests.settle(IMAGE, digest(0), 9)  # older than the entry it would replace
    assert store.digests.settle(IMAGE, digest(1), 10)
    assert item(store) == {ENTRY + IMAGE: {"S": f"0000000000010 {digest(1)}"}}  # the map removed
    old_entry(store, 20, None)  # the version before recorded a move (during a deploy)
    assert store.digests.all() == {}  # its tombstone is the later entry
    assert not store.digests.settle(IMAGE, digest(1), 10)
    tombstone(table_of(store), IMAGE, 15)  # an older move's, late: changes nothing
    assert store.digests.all() == {}
    assert store.digests.settle(IMAGE, digest(2), 20)
    assert store.digests.all() == {IMAGE: digest(2)}
    old_entry(store, 20, digest(2))  # the version before settled the same move too
    assert store.digests.all() == {IMAGE: digest(2)}
    store.digests.drop(IMAGE)  # a registry error: both layouts' entries forgotten, the move kept
    assert item(store) == {ENTRY + IMAGE: {"S": "0000000000020"}}
    assert store.digests.all() == {}
    assert not store.digests.settle(IMAGE, digest(1), 10)  # read before the move: still refused
    assert store.digests.settle(IMAGE, digest(2), 20)  # the tag answers again: its move settles
    assert store.digests.all() == {IMAGE: digest(2)}


def test_dropping_never_removes_a_tombstone_of_either_layout(store: State) -> None:
    old_entry(store, 30, None)
    store.digests.drop(IMAGE)
    assert item(store) == {IMAGE: {"M": {"t": {"N": "30"}}}}
    tombstone(table_of(store), IMAGE, 40)
    store.digests.drop(IMAGE)
    assert item(store) == {ENTRY + IMAGE: {"S": "0000000000040"}}
    assert not store.digests.settle(IMAGE, digest(1), 30)  # still refused: the tombstone stayed


# One tag's writes in any order, by this version and by the version before (its own expressions,
# as a deploy runs both for a while).
WRITE = st.tuples(
    st.sampled_from(["settle", "tombstone", "old-settle", "old-tombstone", "drop"]),
    st.integers(0, 3),  # few times: same-time writes (a move and its settle) are common
    st.integers(1, 3),
)
OLD_NEWER = "attribute_not_exists(#i) OR #i.t <= :t"


def old_write(store: State, t: int, d: str | None) -> bool:
    """The version before's settle or tombstone, under its own condition: whether it landed."""
    value: dict[str, Any] = {"t": {"N": str(t)}} | ({"d": {"S": d}} if d else {})
    written = table_of(store).update(
        digest_key(IMAGE),
        "SET #i = :v",
        condition=OLD_NEWER,
        names={"#i": IMAGE},
        values={":v": {"M": value}, ":t": {"N": str(t)}},
    )
    return written is not None


# the item is deleted at the start of each example: the table fixture is safe to share
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(WRITE, max_size=10))
# stop 35's gap: a move at 1, its settle, a registry error's drop, then a poll's settle read before
# the move (at 0) landed again
@example(writes=[("tombstone", 1, 1), ("settle", 1, 2), ("drop", 0, 1), ("settle", 0, 1)])
@example(writes=[("old-tombstone", 1, 1), ("old-settle", 1, 2), ("drop", 0, 1), ("settle", 0, 1)])
def test_a_settled_digest_is_never_older_than_a_move_whatever_the_order_and_layout(
    writes: list[tuple[str, int, int]], dynamodb: Any, state_table: str
) -> None:
    """What is read as settled was settled at or after every move that landed (a drop included:
    it forgets the settled digest, not the moves), and not dropped since; a settle of this
    version at or after every write lands and is read."""
    from tagpin.adapters.dynamodb import dynamodb_state

    store = dynamodb_state(dynamodb, state_table)
    table_of(store).delete(digest_key(IMAGE))
    moved = -1  # the latest move (tombstone) that landed
    settled: list[tuple[int, str]] = []  # settles that landed since the last drop
    latest = -1  # the latest time written
    for kind, t, n in writes:
        if kind == "drop":
            # the settled entry is forgotten, never the moves it was settled after: a settle read
            # before one of them must still be refused
            store.digests.drop(IMAGE)
            settled = []
            read = store.digests.all()
            assert IMAGE not in read, (writes, read)
            continue
        d = digest(n) if "settle" in kind else None
        if kind == "settle":
            landed = store.digests.settle(IMAGE, digest(n), t)
        elif kind == "tombstone":
            tombstone(table_of(store), IMAGE, t)
            landed = True  # or refused for a later move's tombstone: either way no older settle lands
        else:
            landed = old_write(store, t, d)
        if landed and d is None:
            moved = max(moved, t)
        elif landed and d is not None:
            settled.append((t, d))
        latest = max(latest, t)
        read = store.digests.all()
        if IMAGE in read:
            assert any(d == read[IMAGE] and s >= moved for s, d in settled), (writes, read)
    assert store.digests.settle(IMAGE, digest(9), latest + 1)
    assert store.digests.all() == {IMAGE: digest(9)}


class Calls:
    """The table's client, counting the requests a drop makes; ``between`` runs once, after the
    first read (another function's write landing between the drop's read and its write)."""

    def __init__(self, client: Any, between: Any = None) -> None:
        self._client, self._between = client, between
        self.made: list[str] = []

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._client, name)

        def counted(**request: Any) -> Any:
            self.made.append(name)
            answer = call(**request)
            if name == "get_item" and self._between is not None:
                between, self._between = self._between, None
                between()
            return answer

        return counted


def test_a_drop_leaves_its_move_so_a_settle_read_before_it_is_refused(
    store: State, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop 35's gap: a move at 1, its settle, then a registry error's drop; a poll that read the
    tag before the move (at 0) then tried to settle the old digest, and it landed. A drop costs one
    strongly consistent read and one write; a tag whose entry is already a tombstone, the read."""
    table = table_of(store)
    tombstone(table, IMAGE, 1)
    assert store.digests.settle(IMAGE, digest(2), 1)
    calls = Calls(table.client)
    monkeypatch.setattr(table, "client", calls)
    store.digests.drop(IMAGE)
    assert calls.made == ["get_item", "update_item"]
    assert item(store) == {ENTRY + IMAGE: {"S": "0000000000001"}}
    assert not store.digests.settle(IMAGE, digest(1), 0)  # landed before the fix
    assert store.digests.all() == {}
    calls.made.clear()
    store.digests.drop(IMAGE)  # the tag keeps failing
    assert calls.made == ["get_item"]
    assert store.digests.settle(IMAGE, digest(2), 1)  # it answers again: its move settles


def test_a_write_between_a_drops_read_and_its_tombstone_is_read_again(
    store: State, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = table_of(store)
    assert store.digests.settle(IMAGE, digest(1), 10)

    def moved_and_settled() -> None:
        tombstone(table, IMAGE, 30)
        assert store.digests.settle(IMAGE, digest(3), 30)

    calls = Calls(table.client, moved_and_settled)
    monkeypatch.setattr(table, "client", calls)
    store.digests.drop(IMAGE)
    # the tombstone at 10 was refused (a later entry); the entry read again is dropped at 30
    assert calls.made.count("get_item") == 2
    assert item(store) == {ENTRY + IMAGE: {"S": "0000000000030"}}
    assert not store.digests.settle(IMAGE, digest(1), 10)
