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
from tagpin.adapters.dynamodb.table import TAG as TAG_KEY
from tagpin.adapters.dynamodb.table import TARGET as TARGET_KEY
from tagpin.adapters.dynamodb.tags import DynamoTags
from tagpin.adapters.dynamodb.targets import DynamoTargets
from tagpin.domain.messages import Trigger
from tagpin.ports.index import IndexEntry
from tagpin.ports.state import TargetStatus

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


A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
NOW = 1_700_000_000_000


def test_a_page_s_rows_read_only_what_they_show_and_show_what_every_field_would(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of every condition (current, behind, pending, failed, held until a time, unknown),
    read with the rows' projections, are the rows read whole."""
    state = world.state
    first = sorted(DISCOVERED, key=lambda e: e.target_id)
    for entry in first[:8]:
        state.tags.record(entry.image, A, NOW, Trigger.POLL)
    current, behind, pending, failed, held = (e.target_id for e in first[:5])
    for target, image in ((current, first[0].image), (behind, first[1].image), (pending, first[2].image)):
        assert state.targets.claim(target, image, A if target != behind else B, NOW, Trigger.POLL, NOW)
    assert state.targets.finish(current, A, TargetStatus.VERIFIED, NOW + 1, trigger=Trigger.POLL, detail="ok")
    assert state.targets.finish(behind, B, TargetStatus.VERIFIED, NOW + 1, trigger=Trigger.POLL)
    assert state.targets.claim(failed, first[3].image, A, NOW, Trigger.POLL, NOW)
    assert state.targets.finish(
        failed, A, TargetStatus.FAILED, NOW + 2, trigger=Trigger.POLL, detail="<b>x</b>"
    )
    assert state.targets.hold(held, "", NOW, reason="a person's <i>", trigger=Trigger.MANUAL, until=NOW + 9)
    cookie = world.sign_in()
    batches: list[dict[str, Any]] = []
    wiring.aws("dynamodb").meta.events.register(
        "before-parameter-build.dynamodb.BatchGetItem", lambda params, **_: batches.append(params)
    )
    shown = every_page(world, cookie)
    reads = [r for b in batches for r in b["RequestItems"].values()]
    rows = [r for r in reads if r["Keys"][0]["pk"]["S"].startswith((TARGET_KEY, TAG_KEY))]
    assert rows and all("ProjectionExpression" in r for r in rows)
    monkeypatch.setattr(DynamoTargets, "shown", DynamoTargets.get_many)
    monkeypatch.setattr(DynamoTags, "shown", DynamoTags.get_many)
    whole = every_page(world, cookie)
    assert shown == whole
    body = "".join(shown)
    for target, condition in ((current, "current"), (behind, "behind"), (pending, "pending"),
                              (failed, "failed"), (held, "held")):  # fmt: skip
        row = body.split(f'<tr data-target="{target}">')[1].split("</tr>")[0]
        assert f'class="badge {condition}"' in row, (target, condition)
    assert "&lt;b&gt;x&lt;/b&gt;" in body and "a person&#39;s &lt;i&gt;" in body and "<i>" not in body


def test_an_image_s_page_reads_its_entries_tag_and_id_only(world: World) -> None:
    many = [
        IndexEntry("registry.example.com/team/wide:stable", f"lab/ns{n % 2}/Deployment/w{n}/c", "lab",
                   f"ns{n % 2}", "Deployment", f"w{n}", "c")
        for n in range(30)
    ]  # fmt: skip
    world.state.index.update(many, [])
    cookie = world.sign_in()
    queries: list[dict[str, Any]] = []
    wiring.aws("dynamodb").meta.events.register(
        "before-parameter-build.dynamodb.Query", lambda params, **_: queries.append(params)
    )
    body = world.get("/console/image", cookie=cookie, query={"ref": many[0].image})["body"]
    listed = [part.split('"')[0] for part in body.split('<tr data-target="')[1:]]
    assert sorted(listed) == sorted(e.target_id for e in many)
    entries = [q for q in queries if q["ExpressionAttributeValues"][":pk"]["S"].startswith(FOLLOW)]
    assert entries and all(
        sorted(q["ExpressionAttributeNames"].values()) == ["image", "target_id"] for q in entries
    )
