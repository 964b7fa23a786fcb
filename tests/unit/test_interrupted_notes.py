"""The JSON notes a patch leaves on a workload (``tagpin.dev/replaced``, ``tagpin.dev/digests``) are
a cluster's text: the consumer and the reconciler read them bounded in size and depth, and
anything else counts as no note."""

from __future__ import annotations

import json

from tagpin.domain.annotations import NOTE_MAX_CHARS
from tagpin.domain.annotations import json_note as _json


def test_a_note_is_read_back() -> None:
    note = {"app": {"image": "r/a:1@sha256:" + "a" * 64, "claim": 5}}
    assert _json(json.dumps(note)) == note


def test_a_note_nested_past_the_parser_is_no_note() -> None:
    deep = "[" * 200_000 + "]" * 200_000  # json.loads raises RecursionError on it
    assert _json(deep[: NOTE_MAX_CHARS - 1]) == {}  # bounded: cut, not parsed past
    assert _json('{"a":' * 5_000 + "1" + "}" * 5_000) == {}


def test_a_note_longer_than_the_bound_is_no_note() -> None:
    long = json.dumps({"app": {"image": "x" * NOTE_MAX_CHARS, "claim": 1}})
    assert _json(long) == {}


def test_anything_but_an_object_is_no_note() -> None:
    for text in (None, "", "[]", "3", "not json", '"text"'):
        assert _json(text) == {}


def test_the_consumers_digests_note_nested_too_deep_is_no_note() -> None:
    from tagpin.usecases.patch import _json_map

    assert _json_map('{"a":' * 5_000 + '"x"' + "}" * 5_000) == {}
    assert _json_map('{"app": "sha256:1"}') == {"app": "sha256:1"}
