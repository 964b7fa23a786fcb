"""What the console reads of the index, by key: a target's entries by its id (the ``ByTarget``
index), an entry by its key, and each shard's one item of tags and target counts (``images``),
which follows every change of the index, also when two writers change a shard at once (generated
interleavings), and is written by the first reader of an index written before it existed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tagpin.adapters.dynamodb.index import DynamoIndex
from tagpin.adapters.dynamodb.table import FOLLOW, IMAGES, Table, key
from tagpin.domain.shards import shard
from tagpin.ports.index import IndexEntry

from tests.support.constants import STATE_TABLE

IMAGES_ = [f"registry.example.com/team/app{i}:stable" for i in range(6)]
CLUSTERS = ["prod", "lab"]


def entry(image: str, n: int, cluster: str = "prod") -> IndexEntry:
    return IndexEntry(image, f"{cluster}/ns/Deployment/w{n}/c", cluster, "ns", "Deployment", f"w{n}", "c", 1)


def truth(entries: set[IndexEntry]) -> dict[str, dict[str, dict[str, int]]]:
    """What each shard's item must say: its tags' targets per cluster."""
    counts = Counter((shard(e.image), e.image, e.cluster) for e in entries)
    expected: dict[str, dict[str, dict[str, int]]] = {}
    for (name, image, cluster), n in counts.items():
        expected.setdefault(name, {}).setdefault(image, {})[cluster] = n
    return expected


def summaries(index: DynamoIndex) -> dict[str, dict[str, dict[str, int]]]:
    names = sorted({shard(i) for i in IMAGES_})
    return {s: images for s, images in index.images(names).items() if images}


@pytest.fixture
def table(dynamodb: Any, state_table: str) -> Table:
    return Table(dynamodb, STATE_TABLE)


def test_a_targets_entries_are_read_by_its_id(table: Table) -> None:
    index = DynamoIndex(table)
    one, other = entry(IMAGES_[0], 1), entry(IMAGES_[1], 2)
    index.update([one, other, entry(IMAGES_[2], 3, "lab")], [])
    assert index.of_target(one.target_id) == [one]
    assert index.of_target("prod/ns/Deployment/nowhere/c") == []
    twice = [(one.image, one.target_id), (one.image, one.target_id), (IMAGES_[5], "x")]
    assert index.get_many(twice) == [one]


def test_each_change_of_the_index_is_in_its_shards_item(table: Table) -> None:
    index = DynamoIndex(table)
    entries = {entry(IMAGES_[0], n, CLUSTERS[n % 2]) for n in range(5)} | {entry(IMAGES_[3], 9)}
    index.update(list(entries), [])
    assert summaries(index) == truth(entries)
    gone = {e for e in entries if e.cluster == "lab"}
    index.update([], list(gone))
    assert summaries(index) == truth(entries - gone)


def test_a_shard_written_before_its_item_existed_is_summarised_once(table: Table) -> None:
    index = DynamoIndex(table)
    entries = {entry(IMAGES_[4], n) for n in range(3)}
    index.update(list(entries), [])
    name = shard(IMAGES_[4])
    table.client.delete_item(TableName=STATE_TABLE, Key=key(IMAGES + name))  # as an older index left it
    queries: list[str] = []
    table.client.meta.events.register(
        "before-parameter-build.dynamodb.Query",
        lambda params, **_: queries.append(params["ExpressionAttributeValues"][":pk"]["S"]),
    )
    assert index.images([name]) == {name: {IMAGES_[4]: {"prod": 3}}}
    assert queries == [FOLLOW + name]  # its entries read once, by the first reader
    assert index.images([name]) == {name: {IMAGES_[4]: {"prod": 3}}}
    assert queries == [FOLLOW + name]  # then its item only


class Interleaved(Table):
    """A table whose ``n``-th request runs ``other`` first: another writer's whole update lands
    between two steps of this one's."""

    def __init__(self, table: Table, n: int, other: Any) -> None:
        super().__init__(table.client, table.name)
        self._n, self._other, self._seen = n, other, 0

    def _step(self) -> None:
        self._seen += 1
        if self._seen == self._n and self._other is not None:
            other, self._other = self._other, None
            other()

    def finish(self) -> None:
        if self._other is not None:
            other, self._other = self._other, None
            other()

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self._step()
        return super().get(*args, **kwargs)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self._step()
        return super().query(*args, **kwargs)

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self._step()
        return super().put(*args, **kwargs)

    def batch_write(self, *args: Any, **kwargs: Any) -> Any:
        self._step()
        return super().batch_write(*args, **kwargs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    first=st.sets(st.tuples(st.sampled_from(IMAGES_[:3]), st.integers(0, 5), st.sampled_from(CLUSTERS))),
    second=st.sets(st.tuples(st.sampled_from(IMAGES_[:3]), st.integers(6, 9), st.sampled_from(CLUSTERS))),
    removed=st.sets(st.integers(0, 5)),
    at=st.integers(1, 6),
)
def test_two_writers_at_once_leave_every_shards_item_true(
    table: Table,
    first: set[tuple[str, int, str]],
    second: set[tuple[str, int, str]],
    removed: set[int],
    at: int,
) -> None:
    """Writer A's update (entries, then each touched shard's item: read it, read the shard, write it
    on its version) with writer B's whole update run before A's ``at``-th request: whatever the
    point, every shard's item ends as the entries say."""
    for item in table.client.scan(TableName=STATE_TABLE)["Items"]:
        table.client.delete_item(TableName=STATE_TABLE, Key={"pk": item["pk"], "sk": item["sk"]})
    base = {entry(image, n, cluster) for image, n, cluster in first}
    DynamoIndex(table).update(list(base), [])
    added = {entry(image, n, cluster) for image, n, cluster in second}
    gone = {e for e in base if int(e.name[1:]) in removed}
    writer_b = DynamoIndex(table)
    interleaved = Interleaved(table, at, lambda: writer_b.update(list(added), []))
    DynamoIndex(interleaved).update([], list(gone))
    interleaved.finish()  # B's update, if A made fewer requests than ``at``
    final = (base - gone) | added
    assert summaries(DynamoIndex(table)) == truth(final)
