"""A poll split in parts, through the real poller handler, a moto server and the real registry:
the scheduled invocation only starts the parts; each part polls the tags of its shards, and the
parts together poll every tag exactly once, each with its own cursor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tagpin import wiring
from tagpin.domain.poll_pass import PollPass
from tagpin.domain.shards import PollPart
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.parts import RecordingParts
from tests.support.stack import state_of

pytestmark = pytest.mark.integration

TAGS = 24
PARTS = 4


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=False, poll_interval=None, consume=False)
    with LocalStack(options) as stack:
        assert stack.registry is not None
        document = stack.config_document()
        document["images"] = []
        for n in range(TAGS):
            push_image(stack.registry.url, f"parts/app{n}", "stable")
            target = {"cluster": "local", "namespace": "default", "name": f"app{n}", "container": "app"}
            document["images"].append(
                {"image": f"{stack.registry.host}/parts/app{n}:stable", "targets": [target]}
            )
        stack.write_config(document)
        yield stack


def test_a_split_poll_starts_its_parts_and_they_poll_every_tag_once(
    st: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert st.registry is not None
    images = {f"{st.registry.host}/parts/app{n}:stable" for n in range(TAGS)}
    monkeypatch.setenv("TAGPIN_POLL_PARTS", str(PARTS))
    handler = st.functions["poller"]
    parts = RecordingParts(handler.invoke)
    monkeypatch.setattr(wiring, "poll_parts", lambda function: parts)

    started = st.run_poller()
    assert started == {"parts": PARTS}  # the scheduled invocation polls nothing itself
    assert parts.started == [PollPart(i, PARTS) for i in range(PARTS)]
    assert state_of(st).tags.get_many(sorted(images)) == {}

    results = parts.run()
    assert [r["part"] for r in results] == [f"{i}of{PARTS}" for i in range(PARTS)]
    assert sum(r["resolved"] for r in results) == TAGS and sum(r["changed"] for r in results) == TAGS
    polled = [{o["image"] for o in r["results"]} for r in results]
    assert set().union(*polled) == images and sum(len(p) for p in polled) == TAGS  # each tag once
    for i, tags in enumerate(polled):
        assert all(PollPart(i, PARTS).covers(image) for image in tags)
    store = state_of(st)
    assert set(store.tags.get_many(sorted(images))) == images
    for i in range(PARTS):  # each part keeps its own cursor (finished: no image)
        assert store.cursor.get(PollPart(i, PARTS)) == PollPass()
    assert all(r["cursor"] is None and r["not_reached"] == 0 for r in results)
