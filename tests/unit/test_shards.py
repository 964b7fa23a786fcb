"""Shards and poll parts: every tag in exactly one shard and one part, whatever the split."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tagpin.domain.shards import MAX_PARTS, SHARDS, PollPart, all_shards, shard


@given(st.integers(min_value=1, max_value=MAX_PARTS))
def test_the_parts_of_a_poll_cover_every_shard_once(n: int) -> None:
    parts = [PollPart(i, n) for i in range(n)]
    seen = [s for p in parts for s in p.shards]
    assert sorted(seen) == all_shards() and len(seen) == SHARDS
    assert all(p.shards for p in parts)  # no empty part up to 64


@given(st.text(), st.integers(min_value=1, max_value=MAX_PARTS))
def test_a_tag_is_covered_by_the_part_that_has_its_shard(image: str, n: int) -> None:
    owners = [i for i in range(n) if PollPart(i, n).covers(image)]
    assert len(owners) == 1 and shard(image) in PollPart(owners[0], n).shards


def test_shards_are_stable_across_versions() -> None:
    # the shard is part of stored keys: changing the hash would orphan every index entry
    assert shard("registry.example/team/app:stable") == "25"
    assert shard("docker.io/library/nginx:latest") == shard("docker.io/library/nginx:latest")


@pytest.mark.parametrize(("index", "of"), [(0, 0), (1, 1), (-1, 2), (0, 65), (64, 64)])
def test_an_impossible_part_is_refused(index: int, of: int) -> None:
    with pytest.raises(ValueError, match="poll part"):
        PollPart(index, of)


class Invocations:
    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def invoke(self, **kwargs: object) -> dict[str, int]:
        self.calls.append(kwargs)
        return {"StatusCode": 202}


def test_parts_start_as_asynchronous_invocations_that_name_their_part() -> None:
    import json

    from tagpin.adapters.lambda_parts import LambdaPollParts, event_part

    client = Invocations()
    LambdaPollParts(client, "arn:aws:lambda:eu-west-1:1:function:poller").start(
        [PollPart(0, 2), PollPart(1, 2)]
    )
    assert [c["InvocationType"] for c in client.calls] == ["Event", "Event"]
    assert {c["FunctionName"] for c in client.calls} == {"arn:aws:lambda:eu-west-1:1:function:poller"}
    events = [json.loads(c["Payload"]) for c in client.calls]  # type: ignore[arg-type]
    assert [event_part(e) for e in events] == [PollPart(0, 2), PollPart(1, 2)]
    assert event_part({"source": "aws.events", "detail-type": "Scheduled Event"}) is None
