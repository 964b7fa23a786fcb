"""A plain manifest (or any YAML file): image fields found by the image's name, or values marked
by a comment, as Flux's image-automation setters mark them.

- By name: every ``image:`` value that names the followed repository (any tag or digest, any
  spelling: ``nginx`` is ``docker.io/library/nginx``) becomes ``<name as written>:<tag>@<digest>``,
  in every document of the file.
- By marker: tagpin's own marker, a comment after the value on its line, in the JSON form of
  Flux's setters (``# {"$imagepolicy": "ns:name"}``), with tagpin's key::

      image: registry.example.com/team/web:1.4@sha256:... # {"$tagpin": "web"}
      tag: 1.4@sha256:...                                 # {"$tagpin": "web:tag"}
      digest: sha256:...                                  # {"$tagpin": "web:digest"}

  ``NAME`` marks a whole reference (it must name the followed repository); ``NAME:tag`` a tag
  field: the tag pinned, ``1.4@sha256:...``, or the tag alone when the file also has a
  ``NAME:digest`` field; ``NAME:digest`` a digest field. The marker's name is the one the
  write-back configuration gives (``marker``); a file without it is an error, never a guess.
"""

from __future__ import annotations

import re

from tagpin.domain.gitops.pins import Pin, name_part
from tagpin.domain.gitops.yamltext import (
    Edit,
    EditError,
    Scalar,
    Splice,
    apply,
    documents,
    replace,
    scalars,
    shown,
)

MARKER = re.compile(r'^[ \t]*#[ \t]*\{[ \t]*"\$tagpin"[ \t]*:[ \t]*"(?P<name>[^"\n]{1,200})"[ \t]*\}')
MARKER_NAME = r"^[a-z0-9]([-a-z0-9._/]*[a-z0-9])?$"


def edit_by_name(text: str, pin: Pin) -> Edit:
    splices: list[Splice] = []
    for index, document in documents(text):
        for scalar in scalars(document, (index,)):
            if scalar.path[-1] == "image" and pin.matches(scalar.value):
                new = pin.written_as(name_part(scalar.value))
                splices += [s for s in [replace(scalar, new, shown(scalar.path))] if s]
    if not splices and not _any_named(text, pin):
        raise EditError(f"no image: field names {pin.name}")
    return apply(text, splices)


def _any_named(text: str, pin: Pin) -> bool:
    return any(
        s.path[-1] == "image" and pin.matches(s.value)
        for index, document in documents(text)
        for s in scalars(document, (index,))
    )


def marked(text: str) -> list[tuple[str, Scalar]]:
    """(marker, scalar) of every value followed by a ``{"$tagpin": ...}`` comment on its line."""
    out = []
    for index, document in documents(text):
        for scalar in scalars(document, (index,)):
            end = scalar.node.end_mark.index
            line_end = text.find("\n", end)
            tail = text[end : len(text) if line_end < 0 else line_end]
            if (match := MARKER.match(tail)) is not None:
                out.append((match["name"], scalar))
    return sorted(out, key=lambda m: m[1].node.start_mark.index)


def edit_by_marker(text: str, pin: Pin, marker: str) -> Edit:
    found = [(name, scalar) for name, scalar in marked(text) if name.split(":", 1)[0] == marker]
    if not found:
        raise EditError(f'no value is marked # {{"$tagpin": "{marker}"}}')
    has_digest = any(name == f"{marker}:digest" for name, _ in found)
    splices: list[Splice] = []
    for name, scalar in found:
        field = name.partition(":")[2]
        if field == "":
            if not pin.matches(scalar.value):
                raise EditError(
                    f"line {scalar.line}: the value marked {marker!r} names {scalar.value!r}, "
                    f"not the followed repository {pin.name}"
                )
            new = pin.written_as(name_part(scalar.value))
        elif field == "tag":
            new = pin.tag if has_digest else pin.tag_at_digest
        elif field == "digest" and not pin.pinned:  # the marker stays: its line is not taken out
            raise EditError(
                f"line {scalar.line}: the value marked {name!r} has no digest to go back to "
                f"({pin.image} names none); set it by hand"
            )
        elif field == "digest":
            new = pin.digest
        else:
            raise EditError(f"line {scalar.line}: marker {name!r}: after the name comes :tag or :digest")
        splices += [s for s in [replace(scalar, new, shown(scalar.path))] if s]
    return apply(text, splices)
