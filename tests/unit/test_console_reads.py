"""The console reads by key, whatever the number of targets: a target by its id (a page, a hold, a
release; known or not) is one Query of the index by target id or one read of its entry's key, never
a read of the index's entries; the images and holds pages read no index entry either (each shard's
one item of tags and target counts; the held targets' entries by key). Asserted on the DynamoDB
requests the function makes (the console function with moto in process, called as the HTTP API
calls it); the time it takes is bench/console.py's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
from tagpin import wiring
from tagpin.adapters.dynamodb.table import FOLLOW
from tagpin.domain.messages import Trigger
from tagpin.domain.shards import all_shards
from tagpin.ports.index import IndexEntry
from tagpin_local.lambda_runtime import load_handler

from tests.support.console import IMAGE, TARGET, World, console_config, csrf_of, make_world

DISCOVERED = [
    IndexEntry(f"registry.example.com/team/app{i:03d}:stable", f"lab/ns/Deployment/app{i:03d}/c{n}", "lab",
               "ns", "Deployment", f"app{i:03d}", f"c{n}")
    for i in range(230) for n in range(2)
]  # fmt: skip
UNKNOWN = "lab/ns/Deployment/nowhere/c"


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, dynamodb: Any, state_table: str, queues: Any) -> Iterator[World]:
    world = make_world(monkeypatch, dynamodb, queues)
    world.state.index.update(DISCOVERED, [])
    yield world
    wiring.reset()


def requests_on(client: Any) -> list[tuple[str, dict[str, Any]]]:
    """The DynamoDB requests ``client`` makes from now on: (operation, parameters)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    client.meta.events.register(
        "before-parameter-build.dynamodb", lambda params, model, **_: seen.append((model.name, params))
    )
    return seen


@pytest.fixture
def requests(world: World) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """The function's DynamoDB requests: (operation, parameters)."""
    yield requests_on(wiring.aws("dynamodb"))
    wiring.reset()


def index_reads(requests: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The index's shards whose entries were read (a Query of ``FOLLOW#<shard>`` other than one
    tag's, by the prefix of its keys): none, where a key will do."""
    values = [p.get("ExpressionAttributeValues", {}) for op, p in requests if op == "Query"]
    shards = [v for v in values if v.get(":pk", {}).get("S", "").startswith(FOLLOW)]
    return [v[":pk"]["S"] for v in shards if ":prefix" not in v]


def queries_by_target(requests: list[tuple[str, dict[str, Any]]]) -> int:
    return sum(1 for op, p in requests if op == "Query" and p.get("IndexName") == "ByTarget")


def test_an_unknown_target_is_one_query_by_its_id(world: World, requests: list[Any]) -> None:
    cookie = world.sign_in()
    csrf = csrf_of(world.get("/console/targets", cookie=cookie)["body"])
    requests.clear()
    assert world.get("/console/target", cookie=cookie, query={"id": UNKNOWN})["statusCode"] == 404
    assert index_reads(requests) == [] and queries_by_target(requests) == 1
    for action in ("hold", "release"):
        requests.clear()
        done = world.post(f"/console/actions/{action}", {"target": UNKNOWN, "csrf": csrf}, cookie=cookie)
        assert done["statusCode"] == 400 and "not a followed target" in done["body"]
        assert index_reads(requests) == [] and queries_by_target(requests) == 1, action
    requests.clear()  # a wrong image given: its key read, then the target's id
    wrong = world.get("/console/target", cookie=cookie, query={"id": UNKNOWN, "image": IMAGE})
    assert wrong["statusCode"] == 404 and index_reads(requests) == [] and queries_by_target(requests) == 1


def test_a_discovered_target_is_read_by_key_with_or_without_its_image(
    world: World, requests: list[Any]
) -> None:
    cookie = world.sign_in()
    found = DISCOVERED[77]
    requests.clear()
    page = world.get("/console/target", cookie=cookie, query={"id": found.target_id})
    assert page["statusCode"] == 200 and found.image in page["body"]
    assert index_reads(requests) == [] and queries_by_target(requests) == 1
    requests.clear()
    page = world.get("/console/target", cookie=cookie, query={"id": found.target_id, "image": found.image})
    assert page["statusCode"] == 200 and found.image in page["body"]
    assert index_reads(requests) == [] and queries_by_target(requests) == 0  # its entry's key
    csrf = csrf_of(page["body"])
    for action in ("hold", "release"):  # tagpin hold's way: the target only
        requests.clear()
        done = world.post(
            f"/console/actions/{action}", {"target": found.target_id, "csrf": csrf}, cookie=cookie
        )
        assert done["statusCode"] == 303 and index_reads(requests) == [], action
    configured = world.get("/console/target", cookie=cookie, query={"id": TARGET})
    assert configured["statusCode"] == 200


def test_the_images_page_lists_every_image_once_reading_no_index_entry(
    world: World, requests: list[Any]
) -> None:
    cookie = world.sign_in()
    world.state.index.images(all_shards())  # a shard no update wrote: its first reader writes its item
    requests.clear()
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        body = world.get("/console/images", cookie=cookie, query={"after": cursor} if cursor else {})["body"]
        parts = body.split('<tr data-image="')[1:]
        rows = [part.split('"')[0] for part in parts]
        assert 0 < len(rows) <= 100
        assert all("<td>2</td>" in part for row, part in zip(rows, parts, strict=True) if row != IMAGE)
        seen.extend(rows)
        pages += 1
        if 'id="next"' not in body:
            break
        cursor = unquote(
            body.split('id="next" href="/console/images?after=')[1].split('"')[0].replace("&amp;", "&")
        )
    assert pages == 3 and sorted(seen) == sorted({IMAGE, *(e.image for e in DISCOVERED)})
    assert index_reads(requests) == []  # each shard's one item, never its entries
    overview = world.get("/console", cookie=cookie)["body"]
    assert overview.count('<tr data-image="') == 25


def test_the_holds_page_reads_its_targets_entries_by_key(world: World, requests: list[Any]) -> None:
    now = 1_700_000_000_000
    for entry in DISCOVERED[:10:2]:
        world.state.targets.claim(entry.target_id, entry.image, "sha256:" + "a" * 64, now, Trigger.POLL, now)
        assert world.state.targets.hold(
            entry.target_id, "", now, reason="held by test", trigger=Trigger.MANUAL
        )
    world.state.targets.hold(DISCOVERED[11].target_id, "", now, reason="held first", trigger=Trigger.MANUAL)
    cookie = world.sign_in()
    requests.clear()
    page = world.get("/console/holds", cookie=cookie)["body"]
    held = [part.split('"')[0] for part in page.split('<tr data-target="')[1:]]
    assert sorted(held) == sorted([e.target_id for e in DISCOVERED[:10:2]] + [DISCOVERED[11].target_id])
    assert index_reads(requests) == []
    assert queries_by_target(requests) == 1  # the one held before anything recorded its image


def test_configured_images_are_counted_reading_only_those_also_found_by_label(
    world: World, requests: list[Any]
) -> None:
    extra = [
        {"image": f"registry.example.com/team/conf{i}:stable",
         "targets": [{"cluster": "prod", "namespace": "web", "name": f"conf{i}", "container": "c"}]}
        for i in range(8)
    ]  # fmt: skip
    console_config(extra)
    both = extra[3]["image"]  # configured, and found by label too: its configured target and another
    world.state.index.update(
        [IndexEntry(both, "prod/web/Deployment/conf3/c", "prod", "web", "Deployment", "conf3", "c"),
         IndexEntry(both, "lab/ns/Deployment/more/c", "lab", "ns", "Deployment", "more", "c")], []
    )  # fmt: skip
    wiring.reset()
    world.handler = load_handler("console")
    requests_of = requests_on(wiring.aws("dynamodb"))
    body = world.get("/console/images", cookie=world.sign_in())["body"]
    counts = {part.split('"')[0]: part.split("</tr>")[0] for part in body.split('<tr data-image="')[1:]}
    assert all("<td>1</td>" in counts[e["image"]] for e in extra if e["image"] != both)
    assert "<td>2</td>" in counts[both]  # its configured target once, the other found by label
    prefixes = [
        p["ExpressionAttributeValues"].get(":prefix", {}).get("S") for op, p in requests_of if op == "Query"
    ]
    assert index_reads(requests_of) == [] and [p for p in prefixes if p] == [both + "#"]
