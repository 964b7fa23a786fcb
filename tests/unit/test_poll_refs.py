"""A poll parses each followed tag's reference as the tag's chunk starts (``PollRefs``), not every
tag's before the first request: a container's first poll asks the registry as soon as its first
chunk is parsed. The answers are the same, and a warm container parses nothing again."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage, Registry, Target
from tagpin.domain.refs import ImageRef
from tagpin.ports.state import State
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller
from tagpin.usecases.poll_refs import PollRefs

from tests.support.parses import counted_parses
from tests.support.queues import ListQueue
from tests.unit.test_poll import digest, scripted

A = "registry-a.example"
TAGS, CHUNK = 12, 4


class FirstAsked:
    """The registry, noting how many references had been parsed when it was first asked."""

    def __init__(self, inner: Any, parsed: list[str]) -> None:
        self.inner, self.parsed = inner, parsed
        self.parsed_at_first: int | None = None

    def start_many(self, refs: Iterable[ImageRef], **kw: Any) -> Any:
        if self.parsed_at_first is None:
            self.parsed_at_first = len(self.parsed)
        return self.inner.start_many(refs, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_the_first_chunk_is_asked_for_before_the_other_tags_are_parsed(
    store: State, monkeypatch: pytest.MonkeyPatch
) -> None:
    images = [f"{A}/team/app{i:02d}:stable" for i in range(TAGS)]
    registry = scripted({image: digest(i) for i, image in enumerate(images)})
    followed = [
        FollowedImage(
            image=FollowedKey(image), targets=[Target(cluster="c", name=f"app{i}", container="app")]
        )
        for i, image in enumerate(images)
    ]
    parsed = counted_parses(monkeypatch)
    asked = FirstAsked(registry, parsed)
    polls = Poller(Detector(registry, store, ListQueue()), asked, store, lambda _h: Registry(), chunk=CHUNK)
    first = polls.run(followed)
    assert asked.parsed_at_first is not None and asked.parsed_at_first <= CHUNK, asked.parsed_at_first
    assert sorted(parsed) == images  # every tag parsed once in the run
    assert sorted(registry.calls) == images and first.changed == TAGS
    parsed.clear()
    second = polls.run(followed)
    assert parsed == [] and second.unchanged == TAGS  # a warm poller parses nothing again


def test_every_followed_tag_and_every_head_set_is_polled_once() -> None:
    tags = {
        FollowedKey(f"{A}/team/app{i}:stable"): FollowedImage(
            image=FollowedKey(f"{A}/team/app{i}:stable"),
            targets=[Target(cluster="c", name=f"app{i}", container="app")],
        )
        for i in range(3)
    }
    refs = PollRefs(tags, {})
    head = FollowedKey(f"{A}/team/channel:~1")
    refs[head] = ImageRef.parse(f"{A}/team/channel:1.4.2")  # a channel's head, chosen this run
    first = next(iter(tags))
    assert refs[first] == ImageRef.parse(first)  # a tag's reference, parsed as it is asked for
    assert sorted(refs.polled) == sorted([*tags, head])  # the head polled; the tag asked for not twice
    with pytest.raises(KeyError):
        refs[FollowedKey(f"{A}/team/other:stable")]  # an image the run does not poll
