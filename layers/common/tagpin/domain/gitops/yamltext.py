"""Edits of YAML text that change only the values they mean to: each value is found in the node
tree PyYAML composes (which knows where every scalar starts and ends in the text), replaced in
place in the text, and the result is parsed again and compared with the original data plus the
intended values. Everything else (comments, indentation, quoting, key order, blank lines, the
other documents of the file) stays byte for byte what it was, so a commit's diff is the changed
values and nothing else.

Why not a round-trip library (ruamel.yaml): it re-emits the whole document, and what it re-emits
differs from the input in ways a reviewer sees as noise (indentation of sequences normalised per
document, long lines folded, some quotes and spacing changed). PyYAML is already in the common
layer.

The text is untrusted: at most ``MAX_TEXT`` characters, ``MAX_EVENTS`` parser events,
``MAX_ALIASES`` aliases (an alias bomb would make the comparison exponential) and ``MAX_DEPTH``
levels of nesting; anything else gets an ``EditError`` naming the problem, and the text is left
as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_TEXT = 1024 * 1024
MAX_EVENTS = 200_000
MAX_ALIASES = 100
MAX_DEPTH = 64  # nested mappings and sequences; Kubernetes manifests use about 12

PROPERTIES = re.compile(r"(?:[&!][^\s]*\s+)*")

type Path = tuple[int | str, ...]  # (document index, key or index, ...)


class EditError(ValueError):
    """The file cannot be edited as configured; the message says where and why."""


@dataclass(frozen=True)
class Change:
    """One value changed: where (``path``: ``images[0].newTag``), on which line (1-based), from
    what to what."""

    path: str
    line: int
    old: str | None  # None: the key was added
    new: str | None  # None: the key was removed


@dataclass(frozen=True)
class Edit:
    """The edited text and what changed in it; no changes: the file already says it."""

    text: str
    changes: tuple[Change, ...]

    @property
    def changed(self) -> bool:
        return bool(self.changes)


@dataclass(frozen=True)
class Scalar:
    """A scalar value found in the file, with its path and node."""

    path: Path
    node: ScalarNode

    @property
    def value(self) -> str:
        return str(self.node.value)

    @property
    def line(self) -> int:
        return int(self.node.start_mark.line) + 1


def compose(text: str) -> list[Node]:
    """The documents of ``text`` as node trees, one per document, in order."""
    if len(text) > MAX_TEXT:
        raise EditError(f"the file has {len(text)} characters, more than the {MAX_TEXT} tagpin edits")
    try:
        aliases = depth = 0
        for events, event in enumerate(yaml.parse(text, Loader=yaml.SafeLoader), 1):
            aliases += isinstance(event, yaml.AliasEvent)
            depth += isinstance(event, yaml.CollectionStartEvent) - isinstance(event, yaml.CollectionEndEvent)
            if events > MAX_EVENTS:
                raise EditError(f"the file has more than {MAX_EVENTS} YAML nodes")
            if aliases > MAX_ALIASES:
                raise EditError(f"the file has more than {MAX_ALIASES} aliases (*name)")
            if depth > MAX_DEPTH:
                raise EditError(f"the YAML is nested more than {MAX_DEPTH} levels deep")
        return list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise EditError(f"not valid YAML: {_short(exc)}") from None
    except RecursionError:
        raise EditError("the YAML is nested too deeply") from None


def documents(text: str) -> list[tuple[int, Node]]:
    """(index, node) of each non-empty document, the index as ``yaml.safe_load_all`` counts."""
    nodes = compose(text)
    loaded = _load(text)
    return [(i, node) for i, (node, data) in enumerate(zip(nodes, loaded, strict=True)) if data is not None]


def get(node: Node, key: str) -> tuple[ScalarNode, Node] | None:
    """The (key node, value node) of ``key`` in a mapping node."""
    if not isinstance(node, MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return k, v
    return None


def scalars(node: Node, path: Path) -> Iterator[Scalar]:
    """Every scalar value under ``node`` (mapping values and sequence items), each node once."""
    seen: set[int] = set()
    stack: list[tuple[Node, Path]] = [(node, path)]
    while stack:
        current, where = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ScalarNode):
            yield Scalar(where, current)
        elif isinstance(current, MappingNode):
            for k, v in reversed(current.value):
                if isinstance(k, ScalarNode):
                    stack.append((v, (*where, str(k.value))))
        elif isinstance(current, SequenceNode):
            for i, item in reversed(list(enumerate(current.value))):
                stack.append((item, (*where, i)))


def render(node: ScalarNode, value: str) -> str:
    """``value`` as a scalar in the style ``node`` has: plain stays plain when the value reads
    back as the same string (else double quotes: ``1.10`` would read as a number), quoted stays
    quoted the same way. Block scalars are not edited."""
    if node.style in ("|", ">"):
        raise EditError(f"line {node.start_mark.line + 1}: a block scalar ({node.style}) is not edited")
    if node.style == "'" and value.isprintable():  # else double quotes, which have escapes
        return "'" + value.replace("'", "''") + "'"
    if node.style == '"' or not plain(value):
        return quoted(value)
    return value


def quoted(value: str) -> str:
    """``value`` double-quoted, every character YAML may not carry raw escaped (JSON's escapes
    would write a character outside the BMP as two surrogates, which PyYAML reads as two)."""
    out = []
    for char in value:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif char.isprintable() and char not in "\u2028\u2029\ufeff":
            out.append(char)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def plain(value: str) -> bool:
    """True when ``value`` reads back as the same string unquoted, in block and flow context."""
    if not value or value != value.strip() or "\n" in value:
        return False
    try:
        block: object = yaml.safe_load(f"k: {value}")
        flow: object = yaml.safe_load(f"{{k: {value}}}")
        return block == {"k": value} and flow == {"k": value}
    except yaml.YAMLError:
        return False


@dataclass(frozen=True)
class Splice:
    """Replace ``text[start:end]`` by ``new``; ``path`` and ``value`` say what it means."""

    start: int
    end: int
    new: str
    path: Path
    value: str | None  # None: the key is removed
    change: Change


def replace(scalar: Scalar, value: str, shown: str) -> Splice | None:
    """The splice that sets ``scalar`` to ``value`` (None: it already is)."""
    if scalar.value == value:
        return None
    node = scalar.node
    text = render(node, value)
    change = Change(shown, scalar.line, scalar.value, value)
    # A node's text starts with its properties (``&anchor``, ``!!str``): they stay.
    buffer = node.start_mark.buffer  # the composed text (and a NUL)
    assert isinstance(buffer, str)
    properties = PROPERTIES.match(buffer, node.start_mark.index, node.end_mark.index)
    start = properties.end() if properties else node.start_mark.index
    return Splice(start, node.end_mark.index, text, scalar.path, value, change)


def insert(text: str, after: Scalar, key_column: int, key: str, value: str, path: Path, shown: str) -> Splice:
    """A new ``key: value`` line in the mapping ``after`` belongs to, just below ``after``'s line,
    at the mapping's key column."""
    end = text.find("\n", after.node.end_mark.index)
    at = len(text) if end < 0 else end
    newline = "\n"
    if end > 0 and text[end - 1] == "\r":  # a file with CRLF line ends keeps them
        at, newline = end - 1, "\r\n"
    rendered = value if plain(value) else quoted(value)
    line = newline + " " * key_column + f"{key}: {rendered}"
    change = Change(shown, after.line + 1, None, value)
    return Splice(at, at, line, path, value, change)


def remove(text: str, key: ScalarNode, value: Scalar, shown: str) -> Splice:
    """The splice that removes the ``key: value`` line of a block mapping (a key tagpin added,
    taken back by a revert): the key alone on its line but for its indentation, the value ending
    the line (a comment after it goes too), the line end included."""
    start = text.rfind("\n", 0, key.start_mark.index) + 1
    if text[start : key.start_mark.index].strip():
        raise EditError(f"line {value.line}: {shown} does not start its line; remove it by hand")
    end = text.find("\n", value.node.end_mark.index)
    rest = text[value.node.end_mark.index : len(text) if end < 0 else end]
    if rest.strip() and not rest.strip().startswith("#"):
        raise EditError(f"line {value.line}: {shown} does not end its line; remove it by hand")
    change = Change(shown, value.line, value.value, None)
    return Splice(start, len(text) if end < 0 else end + 1, "", value.path, None, change)


def apply(text: str, splices: list[Splice]) -> Edit:
    """Apply the splices and prove the result: parsed again, it must equal the original data with
    exactly the intended values set (else ``EditError``, and nothing is written)."""
    if not splices:
        return Edit(text, ())
    out = text
    for splice in sorted(splices, key=lambda s: (s.start, s.end), reverse=True):
        out = out[: splice.start] + splice.new + out[splice.end :]
    expected = _load(text)
    for splice in splices:
        _set(expected, splice.path, splice.value)
    if _load(out) != expected:
        raise EditError("the edit would change more than the values it sets (anchors or aliases?)")
    changes = sorted((s.change for s in splices), key=lambda c: (c.line, c.path))
    return Edit(out, tuple(changes))


def shown(path: Path) -> str:
    """``images[0].newTag`` for messages (the document index left out of the first document)."""
    out = "" if path[0] == 0 else f"(document {int(path[0]) + 1}) "
    for i, part in enumerate(path[1:]):
        out += f"[{part}]" if isinstance(part, int) else ("." if i else "") + part
    return out


def _load(text: str) -> list[Any]:
    try:
        return list(yaml.load_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise EditError(f"not valid YAML: {_short(exc)}") from None
    except RecursionError:
        raise EditError("the YAML is nested too deeply") from None


def _set(data: list[Any], path: Path, value: str | None) -> None:
    target: Any = data
    for part in path[:-1]:
        target = target[part]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value


def _short(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return f"{problem} (line {mark.line + 1})" if mark is not None else str(problem)
