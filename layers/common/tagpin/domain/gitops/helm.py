"""A Helm values file: the tag (and, where the chart has one, the digest) at configured paths.

- ``tag`` only (``image.tag``): the tag field gets ``1.4@sha256:...``; a chart that renders
  ``{{ .Values.image.repository }}:{{ .Values.image.tag }}`` then runs ``repo:1.4@sha256:...``.
- ``tag`` and ``digest`` (``image.tag``, ``image.digest``: charts that render
  ``repo@digest`` when a digest is set, e.g. Bitnami's): the tag and the digest each in its field
  (the digest key is added beside the tag when the file has none yet).
- ``repository`` (optional, ``image.repository``): checked, never written: the file must name the
  followed repository (``registry/repo``, or ``repo`` alone when the chart keeps the registry in a
  field of its own), so a digest of one image never lands in another image's values.

Paths are dotted keys with list indexes where needed (``containers[0].image.tag``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tagpin.domain.gitops.pins import Pin
from tagpin.domain.gitops.yamltext import (
    Edit,
    EditError,
    Scalar,
    Splice,
    apply,
    documents,
    insert,
    remove,
    replace,
    shown,
)

PATH = re.compile(r"^[A-Za-z0-9_-]+(\[\d+\])*(\.[A-Za-z0-9_-]+(\[\d+\])*)*$")


@dataclass(frozen=True)
class ValuesPaths:
    tag: str
    digest: str | None = None
    repository: str | None = None


def parse_path(text: str) -> tuple[str | int, ...]:
    """``a.b[0].c`` -> ("a", "b", 0, "c")."""
    if not PATH.fullmatch(text):
        raise ValueError(f"{text!r}: a values path is dotted keys with [index] where needed, e.g. image.tag")
    out: list[str | int] = []
    for part in text.split("."):
        key, *indexes = part.split("[")
        out.append(key)
        out += [int(i.rstrip("]")) for i in indexes]
    return tuple(out)


def edit(text: str, pin: Pin, paths: ValuesPaths) -> Edit:
    docs = documents(text)
    if not docs:
        raise EditError("the values file is empty")
    index, root = docs[0]
    if paths.repository:
        repo = _lookup(root, index, parse_path(paths.repository))
        if repo is None:
            raise EditError(f"{paths.repository}: not in the values file")
        if not (pin.matches(repo.value) or repo.value.strip("/") == pin.image.repository):
            raise EditError(f"{paths.repository} is {repo.value!r}, not the followed repository {pin.name}")
    tag = _lookup(root, index, parse_path(paths.tag))
    if tag is None:
        raise EditError(f"{paths.tag}: not in the values file (add it once; tagpin then keeps it)")
    splices: list[Splice] = []
    if paths.digest is None:
        splices += [s for s in [replace(tag, pin.tag_at_digest, paths.tag)] if s]
        return apply(text, splices)
    splices += [s for s in [replace(tag, pin.tag, paths.tag)] if s]
    where = parse_path(paths.digest)
    digest = _lookup(root, index, where)
    if not pin.pinned:  # a revert to the tag alone: the digest tagpin added goes
        parent = _node(root, where[:-1])
        if digest is not None and isinstance(parent, MappingNode) and not parent.flow_style:
            key = next(k for k, v in parent.value if v is digest.node)
            splices.append(remove(text, key, digest, paths.digest))
        elif digest is not None:
            raise EditError(f"{paths.digest}: the mapping is in flow style ({{...}}); remove the key by hand")
        return apply(text, splices)
    if digest is not None:
        splices += [s for s in [replace(digest, pin.digest, paths.digest)] if s]
        return apply(text, splices)
    if where[:-1] != parse_path(paths.tag)[:-1] or not isinstance(where[-1], str):
        raise EditError(f"{paths.digest}: not in the values file (add it once; tagpin then keeps it)")
    parent = _node(root, where[:-1])
    assert isinstance(parent, MappingNode)
    if parent.flow_style:
        raise EditError(f"{paths.digest}: the mapping is in flow style ({{...}}); add the key once by hand")
    column = next(int(k.start_mark.column) for k, v in parent.value if v is tag.node)
    full = (index, *where)
    splices.append(insert(text, tag, column, where[-1], pin.digest, full, shown(full)))
    return apply(text, splices)


def _node(root: Node, path: tuple[str | int, ...]) -> Node | None:
    node: Node | None = root
    for part in path:
        if isinstance(part, int):
            if not isinstance(node, SequenceNode) or part >= len(node.value):
                return None
            node = node.value[part]
        else:
            if not isinstance(node, MappingNode):
                return None
            node = next((v for k, v in node.value if isinstance(k, ScalarNode) and k.value == part), None)
    return node


def _lookup(root: Node, index: int, path: tuple[str | int, ...]) -> Scalar | None:
    node = _node(root, path)
    if node is None:
        return None
    if not isinstance(node, ScalarNode):
        raise EditError(f"{shown((index, *path))}: not a single value")
    return Scalar((index, *path), node)
