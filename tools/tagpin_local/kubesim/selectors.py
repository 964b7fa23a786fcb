"""Label selectors (``a=b,c!=d,e,!f,g in (x,y),h notin (z)``) and the simple field selectors."""

from __future__ import annotations

import re

from .resources import ApiError, Obj

_SET_RE = re.compile(r"^\s*([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([\w./-]+)\s*(==|!=|=)\s*([\w./-]*)\s*$")
_KEY_RE = re.compile(r"^\s*(!?)\s*([\w./-]+)\s*$")


Requirement = tuple[str, str, frozenset[str]]  # (key, op, values); op in = != in notin exists !


def parse_selector(text: str) -> list[Requirement]:
    """Parse a label selector (``a=b,c!=d,e,!f,g in (x,y),h notin (z)``); ``ApiError`` 400 if malformed."""
    terms, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    reqs: list[Requirement] = []
    for term in (t for t in terms if t.strip()):
        if m := _SET_RE.match(term):
            reqs.append((m.group(1), m.group(2), frozenset(v.strip() for v in m.group(3).split(","))))
        elif m := _EQ_RE.match(term):
            reqs.append((m.group(1), "!=" if m.group(2) == "!=" else "=", frozenset([m.group(3)])))
        elif m := _KEY_RE.match(term):
            reqs.append((m.group(2), "!" if m.group(1) else "exists", frozenset()))
        else:
            raise ApiError(400, f"unable to parse requirement: {term.strip()!r}")
    return reqs


def selector_matches(reqs: list[Requirement], labels: dict[str, str]) -> bool:
    for key, op, values in reqs:
        value = labels.get(key)
        ok = {
            "=": value in values,
            "in": value in values,
            "!=": value not in values,
            "notin": value not in values,
            "exists": key in labels,
            "!": key not in labels,
        }[op]
        if not ok:
            return False
    return True


_FIELDS = ("metadata.name", "metadata.namespace", "status.phase", "spec.nodeName")


def _field_matches(text: str, obj: Obj) -> bool:
    for term in (t for t in text.split(",") if t.strip()):
        m = _EQ_RE.match(term)
        if not m or m.group(1) not in _FIELDS:
            raise ApiError(400, f"field label not supported: {term.strip()}")
        top, sub = m.group(1).split(".")
        actual = (obj.get(top) or {}).get(sub, "")
        if (actual == m.group(3)) != (m.group(2) != "!="):
            return False
    return True
