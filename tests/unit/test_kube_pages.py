"""A LIST page with an item nested deeper than Python's JSON parser goes: the page's other items
(brackets, quotes and escapes in their strings) and its continue token read as they are, the item
a marker of its metadata (tests/integration/test_kube_deep_objects.py: from the real API server)."""

from __future__ import annotations

import json

import pytest
from tagpin.adapters.kubernetes.pages import NOTE, UNREADABLE, load_page

DEEP = "[" * 20_000 + "]" * 20_000
ODD = {"metadata": {"name": 'a"[{', "namespace": "n\\", "labels": {"x": "]}\u00e9\U0001f600"}}, "v": [1, {}]}


def page(*items: str) -> bytes:
    meta = {"continue": 'tok"]}', "resourceVersion": "7"}
    return f'{{"kind": "List", "metadata": {json.dumps(meta)}, "items": [{", ".join(items)}]}}'.encode()


def test_a_page_that_parses_is_read_as_json_reads_it() -> None:
    data = page(json.dumps(ODD))
    assert load_page(data) == json.loads(data)


def test_an_item_too_deep_is_a_marker_and_the_rest_is_kept() -> None:
    meta = '"metadata": {"name": "deep", "namespace": "ns", "labels": {"a": "b"}}'
    deep = f'{{{meta}, "spec": {{"x": {DEEP}}}}}'
    data = page(json.dumps(ODD), deep, json.dumps(ODD))
    with pytest.raises(RecursionError):
        json.loads(data)
    read = load_page(data)
    assert read["metadata"] == {"continue": 'tok"]}', "resourceVersion": "7"}
    assert read["kind"] == "List"
    marker = {"metadata": {"name": "deep", "namespace": "ns", "labels": {"a": "b"}}, UNREADABLE: NOTE}
    assert read["items"] == [ODD, marker, ODD]


def test_a_marker_keeps_only_shallow_metadata() -> None:
    deep = f'{{"metadata": {{"name": "d", "labels": {{"a": {{"b": [1]}}}}, "x": {DEEP}}}}}'
    (item,) = load_page(page(deep))["items"]
    assert item == {"metadata": {"name": "d", "labels": {"a": None}, "x": [None]}, UNREADABLE: NOTE}


@pytest.mark.parametrize("document", [f'{{"metadata": {DEEP}}}', f'{{"a": {{"items": {DEEP}}}}}', DEEP])
def test_a_deep_document_that_is_no_list_still_fails(document: str) -> None:
    with pytest.raises(RecursionError):
        load_page(document.encode())
