"""A Kustomize ``images:`` entry: ``newTag`` and ``digest``.

kustomize's image transformer writes ``name:newTag@digest`` when both fields are set (since
kustomize v4.5.2, kubernetes-sigs/kustomize#4406; earlier releases wrote ``name@digest``, still
pinned, without the tag), so tagpin writes the tag to ``newTag`` and the digest to ``digest``:
the tag stays readable, the digest pins, and both fields mean what kustomize says they mean
(Renovate and ``kustomize edit set image`` read them the same way). An entry that already writes
``newTag: 1.4@sha256:...`` (one field, the form older kustomize needed) keeps that form.

The entry is the one whose ``newName`` (or, without one, ``name``) names the followed repository,
or the one named ``name`` when the configuration says which. ``newName`` is never changed.
"""

from __future__ import annotations

from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from tagpin.domain.gitops.pins import Pin
from tagpin.domain.gitops.yamltext import (
    Edit,
    EditError,
    Scalar,
    Splice,
    apply,
    documents,
    get,
    insert,
    remove,
    replace,
    shown,
)


def edit(text: str, pin: Pin, *, name: str | None = None) -> Edit:
    """Set the matching ``images:`` entries of a kustomization to ``pin``."""
    splices: list[Splice] = []
    found = 0
    for index, document in documents(text):
        images = get(document, "images")
        if images is None or not isinstance(images[1], SequenceNode):
            continue
        for i, entry in enumerate(images[1].value):
            if not isinstance(entry, MappingNode) or not _matches(entry, pin, name):
                continue
            found += 1
            splices += _entry(text, entry, (index, "images", i), pin)
    if not found:
        which = f"named {name!r}" if name else f"for {pin.name}"
        raise EditError(f"no images: entry {which} in the kustomization")
    return apply(text, splices)


def _field(entry: MappingNode, key: str, where: tuple[int | str, ...]) -> Scalar | None:
    pair = get(entry, key)
    if pair is None:
        return None
    if not isinstance(pair[1], ScalarNode):
        raise EditError(f"{shown((*where, key))}: not a single value")
    return Scalar((*where, key), pair[1])


def _matches(entry: MappingNode, pin: Pin, name: str | None) -> bool:
    entry_name = get(entry, "name")
    if entry_name is None or not isinstance(entry_name[1], ScalarNode):
        return False
    new_name = get(entry, "newName")
    target = new_name[1].value if new_name and isinstance(new_name[1], ScalarNode) else entry_name[1].value
    if name is not None:
        if entry_name[1].value != name:
            return False
        if not pin.matches(str(target)):
            raise EditError(f"images entry {name!r} names {target}, not the followed repository {pin.name}")
        return True
    return pin.matches(str(target))


def _entry(text: str, entry: MappingNode, where: tuple[int | str, ...], pin: Pin) -> list[Splice]:
    tag = _field(entry, "newTag", where)
    digest = _field(entry, "digest", where)
    out: list[Splice] = []
    if tag is not None and digest is None and "@" in tag.value:  # the one-field form
        return [s for s in [replace(tag, pin.tag_at_digest, shown(tag.path))] if s]
    if tag is not None:
        out += [s for s in [replace(tag, pin.tag, shown(tag.path))] if s]
    if not pin.pinned:  # a revert to the tag alone: the digest tagpin added goes
        if digest is not None:
            key = get(entry, "digest")
            assert key is not None
            out.append(remove(text, key[0], digest, shown(digest.path)))
        if tag is None:
            anchor = _field(entry, "newName", where) or _field(entry, "name", where)
            assert anchor is not None
            path = (*where, "newTag")
            out.append(
                insert(text, anchor, _key_column(entry, anchor.node), "newTag", pin.tag, path, shown(path))
            )
        return out
    if digest is not None:
        out += [s for s in [replace(digest, pin.digest, shown(digest.path))] if s]
    anchor = tag or _field(entry, "newName", where) or _field(entry, "name", where)
    assert anchor is not None
    column = _key_column(entry, anchor.node)
    if digest is None:
        path = (*where, "digest")
        out.append(insert(text, anchor, column, "digest", pin.digest, path, shown(path)))
    if tag is None:
        path = (*where, "newTag")
        out.append(insert(text, anchor, column, "newTag", pin.tag, path, shown(path)))
    return out


def _key_column(entry: MappingNode, value: ScalarNode) -> int:
    for key, node in entry.value:
        if node is value:
            if entry.flow_style:
                raise EditError(
                    f"line {key.start_mark.line + 1}: a flow-style entry ({{...}}) gets no new key"
                )
            return int(key.start_mark.column)
    raise AssertionError("the value is in the entry")
