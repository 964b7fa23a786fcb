"""The notes a patch leaves on a workload (``tagpin.dev/replaced``) are a cluster's text: the
reconciler reads them bounded in size and depth, and anything else counts as no note."""

from __future__ import annotations

import json

from tagpin.usecases.interrupted import NOTE_MAX_CHARS, _json


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
