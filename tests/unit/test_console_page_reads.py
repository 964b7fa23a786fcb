"""What the console's pages of targets read: of each index entry its tag and its target id only
(the id's five parts are its cluster, namespace, kind, name and container), of each target's state
and each tag's state only what a row shows. Every attribute read is DynamoDB's response to send and
the function's to parse (bench/console.py: the slowest page). The rows are asserted as a person
sees them: every target once, with its tag, its condition and its links."""

from __future__ import annotations

from collections.abc import Iterator
from html import unescape
from typing import Any
from urllib.parse import unquote

import pytest
from tagpin import wiring
from tagpin.adapters.dynamodb.table import FOLLOW
from tagpin.ports.index import IndexEntry

from tests.support.console import TARGET, World, make_world

DISCOVERED = [
    IndexEntry(f"registry.example.com/team/app{i:03d}:stable", f"lab/ns{i % 3}/Deployment/app{i:03d}/c{n}",
               "lab", f"ns{i % 3}", "Deployment", f"app{i:03d}", f"c{n}")
    for i in range(120) for n in range(2)
]  # fmt: skip
GONE_CLUSTER = IndexEntry(
    "registry.example.com/team/old:stable", "gone/ns/Deployment/old/c", "gone", "ns", "Deployment", "old", "c"
)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, dynamodb: Any, state_table: str, queues: Any) -> Iterator[World]:
    world = make_world(monkeypatch, dynamodb, queues)
    world.state.index.update([*DISCOVERED, GONE_CLUSTER], [])
    yield world
    wiring.reset()


def every_page(world: World, cookie: str) -> list[str]:
    bodies, cursor = [], None
    while True:
        body = world.get("/console/targets", cookie=cookie, query={"after": cursor} if cursor else {})["body"]
        bodies.append(body)
        if 'id="next"' not in body:
            return bodies
        cursor = unquote(unescape(body.split('id="next" href="/console/targets?after=')[1].split('"')[0]))


def test_the_pages_of_targets_read_each_index_entry_s_tag_and_id_only(world: World) -> None:
    cookie = world.sign_in()
    queries: list[dict[str, Any]] = []
    wiring.aws("dynamodb").meta.events.register(
        "before-parameter-build.dynamodb.Query", lambda params, **_: queries.append(params)
    )
    bodies = every_page(world, cookie)
    rows = [part.split("</tr>")[0] for body in bodies for part in body.split('<tr data-target="')[1:]]
    listed = [row.split('"')[0] for row in rows]
    assert listed[0] == TARGET and len(listed) == len(set(listed))  # the configuration's first, once
    assert sorted(listed[1:]) == sorted(e.target_id for e in DISCOVERED)  # not the gone cluster's
    for entry, row in zip(sorted(DISCOVERED, key=lambda e: e.target_id), sorted(rows[1:]), strict=True):
        assert f'href="/console/target?id={entry.target_id}&amp;image=' in row
        assert f"{entry.image} (label)" in row and "badge unknown" in row
    pages = [q for q in queries if q["ExpressionAttributeValues"][":pk"]["S"].startswith(FOLLOW)]
    assert pages and all(
        sorted(q["ExpressionAttributeNames"].values()) == ["image", "target_id"] for q in pages
    )
