"""Tags read as versions: one strict reader per kind of version, and the order between them.

Each reader turns the text of a tag into a ``Version`` whose ``key`` orders versions of its kind,
or returns None: the tag is not a version of that kind. Readers are strict on purpose: a tag that a
reader is unsure about is never followed, so a loose reading cannot move a workload by accident.

Decisions, one per edge case (tests/unit/test_versions.py has a table for each):

* semver: the grammar of semver.org 2.0.0, read with a precompiled regular expression (the one the
  specification publishes) rather than the range library's parser: about 1 µs a tag against 3.6,
  and it yields a tuple key; tests check that both order versions alike.

  - ``v1.4.2``: one leading lowercase ``v`` is allowed (the usual Git tag spelling); ``V1.4.2``
    and ``vv1.4.2`` are not versions.
  - ``1.04.2``: rejected. Semver forbids leading zeros; reading it as ``1.4.2`` would make two
    different tags the same version without anyone having said so.
  - ``1.4`` and ``1``: rejected. On registries these are floating aliases that move from patch to
    patch; following one is the ``digest`` policy's job.
  - ``1.4.2+build.7``: build metadata is kept but does not take part in the order (semver's rule).
    OCI tags cannot contain ``+``, so ``1.4.2_build.7`` is read the same way (Helm's spelling
    of ``+`` in a tag); the ``+`` form is accepted too for lists written in semver form.
  - ``1.5.0-rc.1``: a pre-release; whether the policy may choose it is the policy's business.
  - ``1.27.3-alpine``: also a pre-release by the grammar; follow such variants with a ``regex``
    policy (``^(?P<version>\\d+\\.\\d+\\.\\d+)-alpine$``, order ``semver``).

* numeric: ASCII digits only (``123``, ``0042``); leading zeros are padding, so ``0042`` is 42.
  No sign, no ``v``, no separators (``int()`` alone would accept ``1_000`` and ``+7``).
* calver: a calendar date, ``2026.11.03``, ``2026.11.3`` or ``20261103``, optionally followed by a
  revision of that day: ``20261103-1``, ``2026.11.03-2``. The date must exist (``2026.02.30`` is
  not a version); no revision counts as revision 0. Other calendar schemes are not dates
  (``24.04``; ``YYYY.MINOR.MICRO``, whose ``2026.1.40`` is no day): use a ``regex`` policy with
  order ``semver`` for them.
* lexical: any non-empty text, ordered by code point (only for what a ``regex`` policy extracts).
* Everywhere: a tag longer than 128 characters (the OCI distribution spec's limit) is not a version,
  and neither is a cosign or referrers artefact tag (``sha256-<hex>``, ``sha256-<hex>.sig``,
  ``.att``, ``.sbom``), whatever a regex pattern would say: those name a digest, not a release.
  ``latest``, ``stable`` and digest-shaped strings match no reader's grammar.

Equal versions spelt differently (``1.4.2``, ``v1.4.2``, ``1.4.2_build.7``; ``42`` and ``0042``;
``20261103`` and ``2026.11.03``) have equal keys. ``Version.rank`` breaks the tie so that exactly one
tag is the newest, whatever order the tags arrive in: the shortest spelling, then the greatest in
code-point order. Two builds of one version are never both heads, and ``selection.move`` calls a
move between them ``SAME``, so a channel does not flip from one build to the other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from tagpin.domain.refs import TAG_MAX

MAX_TAG_LENGTH = TAG_MAX  # OCI distribution spec: [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}

# semver.org's regular expression (2.0.0) with re.ASCII (\d is 0-9 only), an optional leading v, and
# _ as well as + before the build.
_SEMVER = re.compile(
    r"v?(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:[+_](?P<build>[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?",
    re.ASCII,
)
_NUMERIC = re.compile(r"[0-9]+", re.ASCII)
_CALVER = re.compile(
    r"(?P<y>[0-9]{4})(?:\.(?P<m>[0-9]{1,2})\.(?P<d>[0-9]{1,2})|(?P<mm>[0-9]{2})(?P<dd>[0-9]{2}))"
    r"(?:-(?P<rev>[0-9]+))?",
    re.ASCII,
)
# Tags that name a digest: cosign's signatures, attestations and SBOMs, and the referrers tag schema.
_ARTEFACT = re.compile(r"(?:sha256|sha384|sha512)-[0-9a-f]{32,}(?:\.[a-z]+)?", re.ASCII)

# A release sorts after every pre-release of the same major.minor.patch (semver 11.3).
_RELEASE: tuple[int] = (1,)

# What a reader returns: (key, text, prerelease, build). A plain tuple, not a Version, because
# selection reads thousands of tags and keeps a few: building a frozen dataclass costs about 1 µs,
# a tuple a tenth of that. ``Version.of`` makes the value handed to other modules.
Reading = tuple[tuple[Any, ...], str, bool, str]


@dataclass(frozen=True, slots=True)
class Version:
    """A tag read as a version of one kind.

    ``key`` orders versions of that kind and only of that kind (keys of different kinds are never
    compared); equal keys are the same version. ``text`` is the part of the tag that was read: the
    whole tag, or what a ``regex`` policy's pattern extracted. ``build`` is semver build metadata,
    which does not take part in ``key``.
    """

    tag: str
    key: tuple[Any, ...]
    text: str
    prerelease: bool = False
    build: str = ""

    @classmethod
    def of(cls, tag: str, reading: Reading) -> Version:
        key, text, prerelease, build = reading
        return cls(tag, key, text, prerelease, build)

    @property
    def rank(self) -> tuple[Any, ...]:
        """A total order over tags: ``key``, then the shorter spelling, then the greater code points."""
        return rank(self.tag, self.key)

    @property
    def identity(self) -> tuple[Any, ...]:
        """Equal for two spellings of the same version and build (``v1.4.2`` and ``1.4.2``): how a
        version marked bad, or verified, is recognised whatever tag it was seen under."""
        return (self.key, self.build)

    @property
    def release(self) -> tuple[int, int, int]:
        """``(major, minor, patch)`` of a semver version (``1.5.0`` for ``1.5.0-rc.1``)."""
        major, minor, patch = self.key[:3]
        return major, minor, patch


def rank(tag: str, key: tuple[Any, ...]) -> tuple[Any, ...]:
    """The order in which the newest tag wins: the version, then, between spellings of one version
    (``1.4.2``, ``v1.4.2``, ``1.4.2_build.7``), the shortest, then the greatest in code-point order."""
    return (key, -len(tag), tag)


def _identifier(part: str) -> tuple[int, int | str]:
    # Semver 11.4: numeric identifiers compare as numbers and sort before alphanumeric ones.
    return (0, int(part)) if part.isdigit() else (1, part)


def read_semver(text: str) -> Reading | None:
    """``text`` as a semver version; see the module docstring for the edge cases."""
    if len(text) > MAX_TAG_LENGTH or (match := _SEMVER.fullmatch(text)) is None:
        return None
    major, minor, patch, pre, build = match.groups()
    if pre is None:
        return (int(major), int(minor), int(patch), _RELEASE), text, False, build or ""
    precedence = (0, *map(_identifier, pre.split(".")))
    return (int(major), int(minor), int(patch), precedence), text, True, build or ""


def read_numeric(text: str) -> Reading | None:
    """``text`` as a build number: ASCII digits, leading zeros ignored."""
    if len(text) > MAX_TAG_LENGTH or _NUMERIC.fullmatch(text) is None:
        return None
    return (int(text),), text, False, ""


def read_calver(text: str) -> Reading | None:
    """``text`` as a date and an optional revision of that day."""
    if len(text) > MAX_TAG_LENGTH or (match := _CALVER.fullmatch(text)) is None:
        return None
    year, month, day = int(match["y"]), int(match["m"] or match["mm"]), int(match["d"] or match["dd"])
    try:
        date(year, month, day)
    except ValueError:
        return None
    return (year, month, day, int(match["rev"] or 0)), text, False, ""


def read_lexical(text: str) -> Reading | None:
    """Any non-empty ``text``, ordered by code point."""
    return ((text,), text, False, "") if 0 < len(text) <= MAX_TAG_LENGTH else None


def is_artefact(tag: str) -> bool:
    """A tag that names a digest (cosign, referrers): never a version."""
    return _ARTEFACT.fullmatch(tag) is not None
