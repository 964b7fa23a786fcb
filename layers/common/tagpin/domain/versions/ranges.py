"""Semver ranges in npm's syntax, parsed by ``semantic_version.NpmSpec`` and tabulated once.

Why ``semantic_version`` (python-semanticversion): its ``NpmSpec`` parses the range syntax people
write (``~1.4``, ``^2``, ``>=1.2 <2``, ``1.x``, ``1.2 - 1.5``, ``a || b``) with npm's meaning,
including the ``0.x`` rules of ``^``; it is small, pure Python, has no dependencies and is widely
used (among PyPI's 1,000 most downloaded packages). Its last release (2.10.0) dates from 2022: it is
finished rather than abandoned, and this module uses only its documented ``NpmSpec`` and ``Version``
(plus, for speed only, the shape of ``NpmSpec.clause``, with a fallback). The alternatives:
``semver`` (python-semver, the most used and the most active) has no range syntax at all, only
single comparisons; ``node-semver`` has the syntax, but its ``include_prerelease`` compares every
pre-release as equal to its release (``2.1.0-beta`` satisfies ``>=2.1.0-beta.2``), and it logs at
each comparison.

Ranges name release lines only. A range that names a pre-release (``>=2.0.0-rc.1``) is refused:
npm's rule for those (a pre-release matches only a comparator of the same major.minor.patch) is
easy to misread, and ``semantic_version`` departs from npm in matching pre-releases (``<1.5.0``
admits ``1.5.0-rc.1``, ``1.2.3-rc.1`` admits ``1.2.3``), so this module asks it about releases only.
Pre-releases are the policy's ``prereleases`` and ``floor`` instead
(``tagpin.domain.versions.policy``). Build metadata is refused too: semver gives it no order, and npm
ignores it in ranges where ``semantic_version`` would match it exactly.

Why a table: asking ``NpmSpec`` costs about 14 µs a version (3.6 to make its ``Version``, 10 to walk
the clauses), 140 ms for 10,000 tags. A range is a union of intervals whose ends are the versions its
comparators name, so whether a release is in it changes only at those versions. ``SemverRange`` asks
the library once at each end and once between two ends, and afterwards answers with a binary search.
When the library's clause tree holds a node this module does not know, it asks the library each time
instead: slower, never wrong. tests/unit/test_versions.py checks the table against the library.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

Release = tuple[int, int, int]


class InvalidRange(ValueError):
    """A range that is not npm syntax, or names a pre-release or build metadata."""


def _targets(clause: Any) -> Iterator[Any]:
    """The versions the comparators of an ``NpmSpec`` clause tree name.

    Raises LookupError on a node it does not know (``AnyOf``/``AllOf`` hold ``clauses``, ``Range`` a
    ``target``, ``Always``/``Never`` nothing).
    """
    name = type(clause).__name__
    if name in {"AnyOf", "AllOf"}:
        for child in clause.clauses:
            yield from _targets(child)
    elif name == "Range":
        yield clause.target
    elif name not in {"Always", "Never"}:
        raise LookupError(name)


class SemverRange:
    """An npm-style range, answering "is this release in it?" in O(log n) of its comparators."""

    __slots__ = ("_at", "_between", "_points", "_spec", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        if any(not part.strip() for part in text.split("||")):
            # npm reads an empty alternative as "*": "~1.4 ||" would follow every version.
            raise InvalidRange(f"{text!r} has an empty alternative; write * to allow every version")
        try:
            import semantic_version  # at the first range: a cold start without ranges skips it

            self._spec = semantic_version.NpmSpec(text)
        except Exception as error:  # ValueError mostly; AttributeError on some malformed hyphen ranges
            raise InvalidRange(
                f"{text!r} is not an npm-style semver range (e.g. ~1.4, ^2, >=1.2 <2, 1.x, ^1 || ^2): {error}"
            ) from None
        try:
            targets = list(_targets(self._spec.clause))
        except LookupError:
            self._points: list[Release] | None = None
            return
        for target in targets:
            if target.build:
                raise InvalidRange(
                    f"{text!r} names build metadata ({target}): semver gives builds no order; "
                    "name the release"
                )
            if target.prerelease:
                raise InvalidRange(
                    f"{text!r} names {target}: a range names release lines only; choose pre-releases "
                    "with prereleases: true (and floor to start from one)"
                )
        self._points = sorted({(t.major, t.minor, t.patch) for t in targets})
        self._at = [self._ask(point) for point in self._points]
        self._between = []
        for index in range(len(self._points) + 1):
            low = (0, 0, 0) if index == 0 else _next_patch(self._points[index - 1])
            empty = index < len(self._points) and low >= self._points[index]
            self._between.append(False if empty else self._ask(low))

    def _ask(self, release: Release) -> bool:
        major, minor, patch = release
        import semantic_version

        return semantic_version.Version(major=major, minor=minor, patch=patch) in self._spec

    def admits(self, release: Release) -> bool:
        """Whether ``release`` (major, minor, patch) is in the range."""
        if self._points is None:
            return self._ask(release)
        index = bisect_left(self._points, release)
        if index < len(self._points) and self._points[index] == release:
            return self._at[index]
        return self._between[index]

    def __repr__(self) -> str:
        return f"SemverRange({self.text!r})"


def _next_patch(release: Release) -> Release:
    major, minor, patch = release
    return major, minor, patch + 1
