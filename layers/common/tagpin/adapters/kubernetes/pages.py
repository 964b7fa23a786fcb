"""A LIST page read as JSON, even when one of its items is nested deeper than Python's parser goes.

The API server takes JSON nested up to 10,000 levels (Go's decoder); Python's parser stops short of
that (its C recursion limit, less the frames already on the stack). A custom resource with such a
field (an Argo Rollout keeps whatever it is given under ``trafficRouting.plugins``) made the whole
page a ``RecursionError``, and the reconciler skipped the cluster on every run: the continue token
is in the page that fails. Such a page is read again item by item: the page's metadata and every
item that can be read are kept; one that cannot is replaced by a marker (its metadata, read to a
bounded depth, and ``UNREADABLE``: why). Only a page that fails pays for the scan.
"""

from __future__ import annotations

import json
import re
from typing import Any

UNREADABLE = "tagpin:unreadable"  # a marker's key: why its item was not read
MARKER_DEPTH = 3  # what a marker keeps of its item: {metadata: {labels: {...}}}, deeper is null
NOTE = "nested deeper than tagpin's JSON parser reads"

# A string (escapes and all: a bracket in it is no bracket) or a bracket. Bytes: '"' and '\' never
# occur inside a multi-byte UTF-8 sequence.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_QUOTE, _OPEN_ARRAY = ord('"'), ord("[")
_OPENING = frozenset(b"[{")


def load_page(data: bytes) -> Any:
    """``json.loads(data)``, but an item nested too deep is a marker instead of a ``RecursionError``."""
    try:
        return json.loads(data)
    except RecursionError:
        found = _items(data)
        if found is None:  # not a list as the API server writes one: the error as it was
            raise
    (opened, closed), spans = found
    page = json.loads(data[:opened] + b"[]" + data[closed:])
    if isinstance(page, dict):
        page["items"] = [_item(data[start:end]) for start, end in spans]
    return page


def _item(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        shallow = json.loads(_bounded(raw, MARKER_DEPTH))
        meta = shallow.get("metadata") if isinstance(shallow, dict) else None
        return {"metadata": meta if isinstance(meta, dict) else {}, UNREADABLE: NOTE}


def _items(data: bytes) -> tuple[tuple[int, int], list[tuple[int, int]]] | None:
    """The span of the page's top-level ``items`` array and of each item in it; None when there is
    no such array."""
    depth, opened, closed, start, key = 0, -1, -1, -1, b""
    spans: list[tuple[int, int]] = []
    for token in _TOKENS.finditer(data):
        char = data[token.start()]
        if char == _QUOTE:
            if depth == 1:  # a top-level member's name, or its value (then a name comes next)
                key = token[0]
            continue
        inside = opened >= 0 and closed < 0
        if char in _OPENING:
            depth += 1
            if depth == 2 and char == _OPEN_ARRAY and opened < 0 and key == b'"items"':
                opened = token.start()
            elif depth == 3 and inside:
                start = token.start()
            continue
        if depth == 3 and inside and start >= 0:
            spans.append((start, token.end()))
            start = -1
        elif depth == 2 and inside:
            closed = token.end()
        depth -= 1
    return ((opened, closed), spans) if closed >= 0 else None


def _bounded(raw: bytes, limit: int) -> bytes:
    """``raw`` with each value nested deeper than ``limit`` levels replaced by ``null``."""
    depth, start, kept, out = 0, -1, 0, bytearray()
    for token in _TOKENS.finditer(raw):
        char = raw[token.start()]
        if char == _QUOTE:
            continue
        if char in _OPENING:
            depth += 1
            if depth == limit + 1:
                start = token.start()
            continue
        if depth == limit + 1:
            out += raw[kept:start] + b"null"
            kept = token.end()
        depth -= 1
    return bytes(out + raw[kept:])
