"""Version channels (tagpin.domain.versions): reading tags as versions, policies and their compact
form, npm-style ranges, choosing the head and saying why newer tags were rejected, and never moving
backwards. Tables for every kind and edge case; properties checked against independent models."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
import semantic_version
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from tagpin.domain.versions import (
    InvalidPolicy,
    InvalidRange,
    Order,
    PolicyKind,
    Reason,
    SemverRange,
    Step,
    VersionPolicy,
    move,
    select_head,
)
from tagpin.domain.versions import ranges as ranges_module

SIG = "sha256-" + "ab" * 32 + ".sig"
ATT = "sha256-" + "ab" * 32 + ".att"
SBOM = "sha256-" + "ab" * 32 + ".sbom"
REFERRERS = "sha256-" + "ab" * 32
DIGEST = "sha256:" + "ab" * 32
LONGEST = 128  # the OCI distribution spec's longest tag: [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}

SEMVER = VersionPolicy(kind=PolicyKind.SEMVER)
NUMERIC = VersionPolicy(kind=PolicyKind.NUMERIC)
CALVER = VersionPolicy(kind=PolicyKind.CALVER)


def rejected(selection: Any) -> list[tuple[str, Reason]]:
    return [(r.tag, r.reason) for r in selection.rejected]


# -- reading tags --------------------------------------------------------------------------------------

# tag -> (is a version, pre-release, build)
SEMVER_TAGS = {
    "1.4.2": (True, False, ""),
    "0.0.0": (True, False, ""),
    "v1.4.2": (True, False, ""),
    "1.4.2+build.7": (True, False, "build.7"),
    "1.4.2_build.7": (True, False, "build.7"),  # OCI tags cannot hold "+": Helm's spelling
    "v1.4.2_build.7": (True, False, "build.7"),
    "1.5.0-rc.1": (True, True, ""),
    "1.5.0-rc.1+build.7": (True, True, "build.7"),
    "1.5.0-0": (True, True, ""),
    "1.27.3-alpine": (True, True, ""),
    "1.0.0-x-y.z--": (True, True, ""),
    "V1.4.2": (False, False, ""),
    "vv1.4.2": (False, False, ""),
    "1.04.2": (False, False, ""),  # leading zeros: rejected, not normalised
    "01.4.2": (False, False, ""),
    "1.4.02": (False, False, ""),
    "1.5.0-rc.01": (False, False, ""),  # a numeric pre-release identifier with a leading zero
    "1.4": (False, False, ""),  # a floating alias
    "1": (False, False, ""),
    "1.4.2.5": (False, False, ""),
    "1.4.2-": (False, False, ""),
    "1.4.2+": (False, False, ""),
    "1.4.2_build_7": (False, False, ""),
    "1.5.0-rc..1": (False, False, ""),
    " 1.4.2": (False, False, ""),
    "\uff11.\uff14.\uff12": (False, False, ""),  # full-width digits
    "latest": (False, False, ""),
    "stable": (False, False, ""),
    "": (False, False, ""),
    SIG: (False, False, ""),
    ATT: (False, False, ""),
    SBOM: (False, False, ""),
    REFERRERS: (False, False, ""),
    DIGEST: (False, False, ""),
    "1.4.2-" + "a" * (LONGEST - 6): (True, True, ""),  # exactly 128 characters
    "1.4.2-" + "a" * (LONGEST - 5): (False, False, ""),  # 129
}


@pytest.mark.parametrize(("tag", "expected"), SEMVER_TAGS.items(), ids=[t[:40] for t in SEMVER_TAGS])
def test_semver_tags(tag: str, expected: tuple[bool, bool, str]) -> None:
    version = SEMVER.version(tag)
    assert (version is not None, bool(version and version.prerelease), version.build if version else "") == (
        expected
    )
    if version is not None:
        assert version.tag == tag


def test_semver_order_follows_the_specification() -> None:
    # semver.org, section 11, in increasing precedence; then releases.
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.1.0",
        "1.9.0",
        "1.10.0",
        "2.0.0",
        "10.0.0",
    ]
    keys = [SEMVER.version(t).key for t in ordered]  # type: ignore[union-attr]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize(
    "spellings",
    [
        ["1.4.2", "v1.4.2", "1.4.2+build.7", "1.4.2_build.8", "v1.4.2+x"],  # build metadata has no order
        ["1.5.0-rc.1", "v1.5.0-rc.1", "1.5.0-rc.1+b"],
    ],
)
def test_semver_spellings_of_one_version_have_one_key(spellings: list[str]) -> None:
    assert len({SEMVER.version(t).key for t in spellings}) == 1  # type: ignore[union-attr]


# tag -> the same number as, or None when not a build number
NUMERIC_TAGS: dict[str, int | None] = {
    "123": 123,
    "0042": 42,
    "0": 0,
    "000": 0,
    "20261103": 20261103,
    "9" * LONGEST: int("9" * LONGEST),
    "9" * (LONGEST + 1): None,
    "-1": None,
    "+7": None,
    "1_000": None,  # int() would accept it
    " 12": None,
    "12a": None,
    "v123": None,
    "1.0": None,
    "\u0661\u0662": None,  # Arabic-Indic digits: str.isdigit() is True for them
    "": None,
    "latest": None,
    SIG: None,
}


@pytest.mark.parametrize(
    ("tag", "number"), NUMERIC_TAGS.items(), ids=[t[:20] or "empty" for t in NUMERIC_TAGS]
)
def test_numeric_tags(tag: str, number: int | None) -> None:
    version = NUMERIC.version(tag)
    assert (None if version is None else version.key) == (None if number is None else (number,))


# tag -> (year, month, day, revision), or None
CALVER_TAGS: dict[str, tuple[int, int, int, int] | None] = {
    "2026.11.03": (2026, 11, 3, 0),
    "2026.11.3": (2026, 11, 3, 0),
    "20261103": (2026, 11, 3, 0),
    "20261103-1": (2026, 11, 3, 1),
    "2026.11.03-2": (2026, 11, 3, 2),
    "2026.1.7": (2026, 1, 7, 0),
    "2024.02.29": (2024, 2, 29, 0),  # a leap day
    "2025.02.29": None,
    "2026.02.30": None,
    "20260230": None,
    "2026.13.01": None,
    "2026.00.10": None,
    "2026.11": None,  # year.month: not a date
    "26.11.03": None,
    "2026-11-03": None,
    "2026.011.03": None,
    "2026.11.03-rc1": None,
    "2026.11.03.1": None,
    "v2026.11.03": None,
    "2026110": None,
    "": None,
    "latest": None,
}


@pytest.mark.parametrize(("tag", "parts"), CALVER_TAGS.items(), ids=[t or "empty" for t in CALVER_TAGS])
def test_calver_tags(tag: str, parts: tuple[int, int, int, int] | None) -> None:
    version = CALVER.version(tag)
    assert (None if version is None else version.key) == parts


BUILDS = VersionPolicy(kind=PolicyKind.REGEX, pattern=r"^build-(?P<version>\d+)$")


@pytest.mark.parametrize(
    ("policy", "tag", "text"),
    [
        (BUILDS, "build-12", "12"),
        (BUILDS, "build-012", "012"),
        (BUILDS, "build-x", None),
        (BUILDS, "12", None),
        (BUILDS, "build-" + "1" * (LONGEST - 5), None),  # 129 characters
        (VersionPolicy(kind="regex", pattern="(?P<version>.+)", order="lexical"), SIG, None),
        (VersionPolicy(kind="regex", pattern="(?P<version>.+)", order="lexical"), REFERRERS, None),
        (VersionPolicy(kind="regex", pattern="(?P<version>.+)", order="lexical"), "latest", "latest"),
        (VersionPolicy(kind="regex", pattern=r"^(?:rel-(?P<version>\d+)|other)$"), "other", None),
        (
            VersionPolicy(kind="regex", pattern=r"(?P<version>\d+\.\d+\.\d+)-alpine", order="semver"),
            "x1.2.3-alpine",
            "1.2.3",
        ),
        (
            VersionPolicy(kind="regex", pattern=r"^(?P<version>.+)-alpine$", order="semver"),
            "1.2-alpine",
            None,
        ),
        (
            VersionPolicy(kind="regex", pattern=r"^r(?P<version>.+)$", order="calver"),
            "r2026.11.03",
            "2026.11.03",
        ),
    ],
)
def test_regex_tags(policy: VersionPolicy, tag: str, text: str | None) -> None:
    version = policy.version(tag)
    assert (None if version is None else version.text) == text
    if version is not None:
        assert version.tag == tag


def test_regex_numeric_order_reads_the_extracted_number() -> None:
    assert BUILDS.version("build-012").key == BUILDS.version("build-12").key == (12,)  # type: ignore[union-attr]
    assert BUILDS.version("build-100").key > BUILDS.version("build-99").key  # type: ignore[union-attr]


# -- ranges --------------------------------------------------------------------------------------------

# range -> (versions in it, versions outside it)
RANGES = {
    "~1.4": (["1.4.0", "1.4.9", "1.4.123"], ["1.3.9", "1.5.0", "2.4.0"]),
    "~1.4.2": (["1.4.2", "1.4.9"], ["1.4.1", "1.5.0"]),
    "^2": (["2.0.0", "2.9.9"], ["1.9.9", "3.0.0"]),
    "^0.2": (["0.2.0", "0.2.9"], ["0.1.9", "0.3.0", "1.0.0"]),
    "^0.0.3": (["0.0.3"], ["0.0.2", "0.0.4"]),
    ">=1.2 <2": (["1.2.0", "1.9.9"], ["1.1.9", "2.0.0"]),
    "1.x": (["1.0.0", "1.99.0"], ["0.9.0", "2.0.0"]),
    "1.2.x": (["1.2.0", "1.2.7"], ["1.3.0"]),
    "1.2 - 1.5": (["1.2.0", "1.5.9"], ["1.1.9", "1.6.0"]),
    "^1 || ^3": (["1.0.0", "3.4.0"], ["2.0.0", "4.0.0"]),
    ">1.2": (["1.3.0"], ["1.2.9"]),
    "<=1.2": (["1.2.9", "0.0.1"], ["1.3.0"]),
    "<1.5.0": (["1.4.99"], ["1.5.0"]),
    "=1.4.2": (["1.4.2"], ["1.4.3"]),
    "v1.4": (["1.4.5"], ["1.5.0"]),
    "*": (["0.0.0", "99.0.0"], []),
}


@pytest.mark.parametrize(("text", "cases"), RANGES.items())
def test_ranges(text: str, cases: tuple[list[str], list[str]]) -> None:
    semver_range = SemverRange(text)
    inside, outside = cases
    release = [SEMVER.version(v).release for v in inside + outside]  # type: ignore[union-attr]
    assert [semver_range.admits(r) for r in release] == [True] * len(inside) + [False] * len(outside)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("~1.04", "is not an npm-style semver range"),
        (">=1.2,<2", "is not an npm-style semver range"),
        ("1.2.3 - ", "is not an npm-style semver range"),
        ("latest", "is not an npm-style semver range"),
        ("~1.4 ||", "empty alternative"),
        ("|| ^2", "empty alternative"),
        (">=2.0.0-rc.1", "names 2.0.0-rc.1"),
        ("1.2.3-rc.1", "names 1.2.3-rc.1"),
        ("=1.2.3+build.7", "names build metadata (1.2.3+build.7)"),
    ],
)
def test_invalid_ranges(text: str, message: str) -> None:
    with pytest.raises(InvalidRange, match=re.escape(message)):
        SemverRange(text)


def test_a_range_the_table_cannot_read_is_asked_of_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(clause: Any) -> Any:
        raise LookupError("NewClause")

    monkeypatch.setattr(ranges_module, "_targets", unknown)
    semver_range = SemverRange("~1.4 || ^3")
    assert [semver_range.admits(r) for r in [(1, 4, 2), (1, 5, 0), (3, 9, 0), (2, 0, 0)]] == [
        True,
        False,
        True,
        False,
    ]


_PARTIAL = st.one_of(
    st.tuples(st.integers(0, 3)).map(lambda p: f"{p[0]}"),
    st.tuples(st.integers(0, 3), st.integers(0, 3)).map(lambda p: f"{p[0]}.{p[1]}"),
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)).map(lambda p: f"{p[0]}.{p[1]}.{p[2]}"),
    st.sampled_from(["1.x", "2.1.x", "*"]),
)
_COMPARATOR = st.tuples(st.sampled_from(["", "=", "^", "~", ">", ">=", "<", "<="]), _PARTIAL).map("".join)
_GROUP = st.one_of(
    st.lists(_COMPARATOR, min_size=1, max_size=3).map(" ".join),
    st.tuples(_PARTIAL, _PARTIAL).map(" - ".join),
)
_RANGE = st.lists(_GROUP, min_size=1, max_size=3).map(" || ".join)


@settings(max_examples=300, deadline=None)
@given(_RANGE, st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4)), max_size=30))
def test_the_range_table_answers_as_the_library(text: str, releases: list[tuple[int, int, int]]) -> None:
    try:
        spec = semantic_version.NpmSpec(text)
    except ValueError:
        return  # a range the library refuses is refused by SemverRange too (test_invalid_ranges)
    semver_range = SemverRange(text)
    for release in releases:
        expected = semantic_version.Version(major=release[0], minor=release[1], patch=release[2]) in spec
        assert semver_range.admits(release) == expected, (text, release)


_IDENTIFIER = st.one_of(st.integers(0, 20).map(str), st.sampled_from(["alpha", "beta", "rc", "x-1", "a1"]))
_SEMVER_TEXT = st.builds(
    lambda a, b, c, pre: f"{a}.{b}.{c}" + (f"-{'.'.join(pre)}" if pre else ""),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.lists(_IDENTIFIER, max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SEMVER_TEXT, min_size=2, max_size=12))
def test_semver_keys_order_as_the_library_does(texts: list[str]) -> None:
    ours = sorted(texts, key=lambda t: SEMVER.version(t).key)  # type: ignore[union-attr]
    theirs = sorted(texts, key=semantic_version.Version)
    assert [semantic_version.Version(t) for t in ours] == [semantic_version.Version(t) for t in theirs]


# -- policies --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"kind": "regex", "pattern": r"^build-\d+$"},
            "pattern: '^build-\\\\d+$' has no group named version",
        ),
        ({"kind": "regex"}, "pattern: kind regex needs a pattern"),
        ({"kind": "regex", "pattern": "(?P<version>"}, "is not a regular expression"),
        ({"kind": "semver", "range": "~1.04"}, "range: '~1.04' is not an npm-style semver range"),
        ({"kind": "semver", "range": "~1.4 ||"}, "range: '~1.4 ||' has an empty alternative"),
        ({"kind": "semver", "range": ">=2.0.0-rc.1"}, "range: '>=2.0.0-rc.1' names 2.0.0-rc.1"),
        ({"kind": "semver", "range": ""}, "at least 1 character"),
        ({"kind": "numeric", "range": ">=100"}, "range: applies to semver versions only"),
        (
            {"kind": "regex", "pattern": "(?P<version>.+)", "range": "^1"},
            "range: applies to semver versions only",
        ),
        ({"kind": "calver", "prereleases": True}, "prereleases: applies to semver versions only"),
        ({"kind": "semver", "pattern": "(?P<version>.+)"}, "pattern: applies to kind regex only"),
        ({"kind": "numeric", "order": "lexical"}, "order: applies to kind regex only"),
        ({"kind": "regex", "pattern": "(?P<version>.+)", "order": "alphabetical"}, "order"),
        ({"kind": "digest", "range": "~1"}, "range: a digest policy follows one tag's digest"),
        ({"range": "~1"}, "range: a digest policy follows one tag's digest"),  # digest is the default
        ({"kind": "digest", "include": ["x"]}, "include: a digest policy"),
        ({"kind": "digest", "prereleases": True}, "prereleases: a digest policy"),
        ({"kind": "semver", "floor": "1.4"}, "floor: '1.4' is not a semver version"),
        ({"kind": "numeric", "ceiling": "v1"}, "ceiling: 'v1' is not a numeric version"),
        ({"kind": "calver", "floor": "2026.02.30"}, "floor: '2026.02.30' is not a calver version"),
        ({"kind": "semver", "floor": "2.0.0", "ceiling": "1.0.0"}, "floor '2.0.0' is above ceiling '1.0.0'"),
        ({"kind": "semver", "include": ["ok", "("]}, "include.1"),
        ({"kind": "semver", "exclude": ["["]}, "is not a regular expression"),
        ({"kind": "semver", "colour": "blue"}, "Extra inputs are not permitted"),
        ({"kind": "version"}, "kind"),
    ],
)
def test_invalid_policies_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        VersionPolicy.model_validate(fields)
    assert message in str(caught.value)


def test_a_policy_is_frozen_and_compares_by_value() -> None:
    policy = VersionPolicy.parse("~1.4")
    with pytest.raises(ValidationError):
        policy.range = "^2"  # type: ignore[misc]
    assert policy == VersionPolicy(kind="semver", range="~1.4")
    assert hash(policy) == hash(VersionPolicy(kind="semver", range="~1.4"))
    assert policy != VersionPolicy(kind="semver", range="~1.5")
    assert VersionPolicy.model_validate(policy.model_dump()) == policy


def test_the_default_policy_is_digest_and_chooses_nothing() -> None:
    policy = VersionPolicy()
    assert (policy.kind, policy.chooses, policy.effective_order) == (PolicyKind.DIGEST, False, None)
    with pytest.raises(ValueError, match="digest policy"):
        policy.version("1.0.0")
    with pytest.raises(ValueError, match="digest policy"):
        select_head(policy, ["1.0.0"])
    with pytest.raises(ValueError, match="digest policy"):
        move(policy, "1.0.0", "1.0.1")


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("digest", {"kind": PolicyKind.DIGEST}),
        ("semver", {"kind": PolicyKind.SEMVER}),
        ("semver:~1.4", {"kind": PolicyKind.SEMVER, "range": "~1.4"}),
        ("~1.4", {"kind": PolicyKind.SEMVER, "range": "~1.4"}),
        ("^2", {"kind": PolicyKind.SEMVER, "range": "^2"}),
        (">=1.2 <2", {"kind": PolicyKind.SEMVER, "range": ">=1.2 <2"}),
        ("  1.x ", {"kind": PolicyKind.SEMVER, "range": "1.x"}),
        ("^1 || ^3", {"kind": PolicyKind.SEMVER, "range": "^1 || ^3"}),
        ("numeric", {"kind": PolicyKind.NUMERIC}),
        ("calver", {"kind": PolicyKind.CALVER}),
        (
            r"regex:^build-(?P<version>\d+)$",
            {"kind": PolicyKind.REGEX, "pattern": r"^build-(?P<version>\d+)$"},
        ),
        ("regex:^a:(?P<version>.+)$", {"kind": PolicyKind.REGEX, "pattern": "^a:(?P<version>.+)$"}),
        (
            "regex/semver:^(?P<version>.+)-alpine$",
            {"kind": PolicyKind.REGEX, "pattern": "^(?P<version>.+)-alpine$", "order": Order.SEMVER},
        ),
    ],
)
def test_compact_form(text: str, fields: dict[str, Any]) -> None:
    policy = VersionPolicy.parse(text)
    assert policy == VersionPolicy(**fields)


def test_compact_regex_orders_numerically_by_default() -> None:
    policy = VersionPolicy.parse(r"regex:^build-(?P<version>\d+)$")
    assert policy.order is None
    assert policy.effective_order is Order.NUMERIC


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty version policy"),
        ("   ", "empty version policy"),
        ("numeric:>=3", "numeric takes no argument"),
        ("digest:latest", "digest takes no argument"),
        ("calver:2026", "calver takes no argument"),
        ("regex", "regex needs a pattern"),
        ("regex:", "regex needs a pattern"),
        (r"regex:^build-\d+$", "has no group named version"),
        ("regex/alphabetical:(?P<version>.+)", "unknown order 'alphabetical'"),
        ("semver/numeric:~1", "only regex takes an order"),
        ("semver:", "range: String should have at least 1 character"),
        ("semver:~1.04", "range: '~1.04' is not an npm-style semver range"),
        ("semvr", "expected digest, semver[:RANGE]"),
        ("~1.04", "expected digest, semver[:RANGE]"),
        (">=2.0.0-rc.1", "names 2.0.0-rc.1"),
    ],
)
def test_invalid_compact_forms(text: str, message: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        VersionPolicy.parse(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)  # one line, for an annotation's event or the CLI


# -- choosing the head -------------------------------------------------------------------------------

SELECTIONS = [
    pytest.param(
        VersionPolicy.parse("~1.4"),
        ["1.3.9", "1.4.0", "1.4.7", "v1.4.8", "1.4.9-rc.1", "1.5.0", "2.0.0", "latest", SIG, "1.04.9"],
        {},
        "v1.4.8",
        [
            ("2.0.0", Reason.OUT_OF_RANGE),
            ("1.5.0", Reason.OUT_OF_RANGE),
            ("1.4.9-rc.1", Reason.PRERELEASE),
            ("1.04.9", Reason.NOT_A_VERSION),
            ("latest", Reason.NOT_A_VERSION),
            (SIG, Reason.NOT_A_VERSION),
        ],
        id="semver-tilde",
    ),
    pytest.param(
        VersionPolicy(kind="semver", range="~1.4", prereleases=True),
        ["1.4.8", "1.4.9-rc.1", "1.4.9-beta.3", "1.5.0-rc.1"],
        {},
        "1.4.9-rc.1",
        [("1.5.0-rc.1", Reason.OUT_OF_RANGE)],
        id="prereleases-of-releases-in-range",
    ),
    pytest.param(
        VersionPolicy(kind="semver", range="^1", prereleases=True),
        ["1.9.0", "1.10.0-rc.2", "2.0.0-rc.1", "2.0.0"],
        {},
        "1.10.0-rc.2",
        [("2.0.0", Reason.OUT_OF_RANGE), ("2.0.0-rc.1", Reason.OUT_OF_RANGE)],
        id="no-rc-of-the-next-major",
    ),
    pytest.param(
        VersionPolicy(kind="semver", prereleases=True, floor="2.0.0-rc.2"),
        ["1.9.0", "2.0.0-beta.1", "2.0.0-rc.1", "2.0.0-rc.2"],
        {},
        "2.0.0-rc.2",
        [],
        id="floor-on-a-prerelease",
    ),
    pytest.param(
        VersionPolicy(kind="semver", prereleases=True, floor="2.0.0-rc.2"),
        ["1.9.0", "2.0.0-rc.1"],
        {},
        None,
        [("2.0.0-rc.1", Reason.BELOW_FLOOR), ("1.9.0", Reason.BELOW_FLOOR)],
        id="everything-below-floor",
    ),
    pytest.param(
        SEMVER,
        ["1.4.2+build.7", "v1.4.2", "1.4.2", "1.4.2_build.8", "1.4.1"],
        {},
        "1.4.2",
        [],
        id="spellings-shortest-wins",
    ),
    pytest.param(
        SEMVER,
        ["1.4.2+build.7", "1.4.2_build.7", "1.4.2+build.8"],
        {},
        "1.4.2_build.7",  # same length: the greatest code point ("_" > "+", "7" < "8" only after that)
        [],
        id="builds-same-length",
    ),
    pytest.param(
        VersionPolicy(kind="semver", include=[r"^\d"], exclude=["-alpine$"]),
        ["1.2.0", "v1.3.0", "1.4.0-alpine", "0.9.0"],
        {},
        "1.2.0",
        [("1.4.0-alpine", Reason.EXCLUDED), ("v1.3.0", Reason.NOT_INCLUDED)],
        id="include-exclude",
    ),
    pytest.param(
        VersionPolicy(kind="semver", floor="1.2.0", ceiling="1.9.9"),
        ["1.1.0", "1.2.0", "1.9.9", "2.0.0"],
        {},
        "1.9.9",
        [("2.0.0", Reason.ABOVE_CEILING)],
        id="floor-ceiling",
    ),
    pytest.param(
        VersionPolicy.parse("^1"),
        ["1.4.1", "1.4.2", "1.4.3", "3.0.0"],
        {"bad": {"v1.4.3", "3.0.0"}},
        "1.4.2",
        [("3.0.0", Reason.OUT_OF_RANGE), ("1.4.3", Reason.BAD)],
        id="bad-by-another-spelling-range-first",
    ),
    pytest.param(
        SEMVER,
        ["1.4.2", "1.4.3"],
        {"bad": {"1.4.3+build.1"}},
        "1.4.3",
        [],
        id="bad-names-one-build",
    ),
    pytest.param(
        SEMVER,
        ["1.4.1", "1.4.2", "1.4.3-rc.1", "1.4.3"],
        {"allowed": {"1.4.1", "v1.4.2", "1.4.3-rc.1"}, "bad": {"1.4.2"}},
        "1.4.1",
        [("1.4.3", Reason.NOT_VERIFIED), ("1.4.3-rc.1", Reason.PRERELEASE), ("1.4.2", Reason.BAD)],
        id="promotion-allowed-and-bad",
    ),
    pytest.param(
        SEMVER,
        ["1.4.1", "1.4.2"],
        {"allowed": set()},
        None,
        [("1.4.2", Reason.NOT_VERIFIED), ("1.4.1", Reason.NOT_VERIFIED)],
        id="nothing-verified",
    ),
    pytest.param(
        VersionPolicy(kind="numeric", ceiling="99"),
        ["7", "42", "0042", "99", "100", "v101", "1_000", "latest"],
        {},
        "99",
        [
            ("100", Reason.ABOVE_CEILING),
            ("1_000", Reason.NOT_A_VERSION),
            ("latest", Reason.NOT_A_VERSION),
            ("v101", Reason.NOT_A_VERSION),
        ],
        id="numeric-ceiling",
    ),
    pytest.param(NUMERIC, ["0042", "42", "7"], {}, "42", [], id="numeric-padding"),
    pytest.param(
        CALVER,
        ["2026.11.03", "2026.11.3", "20261103", "20261103-1", "2026.11.03-2", "2026.02.30", "2026.11.04-rc"],
        {},
        "2026.11.03-2",
        [("2026.02.30", Reason.NOT_A_VERSION), ("2026.11.04-rc", Reason.NOT_A_VERSION)],
        id="calver-revisions",
    ),
    pytest.param(CALVER, ["2026.11.03", "2026.11.3", "20261103"], {}, "20261103", [], id="calver-spellings"),
    pytest.param(
        VersionPolicy(kind="calver", floor="2026.01.01", exclude=["-"]),
        ["2025.12.31", "20260101", "2026.06.01-1"],
        {},
        "20260101",
        [("2026.06.01-1", Reason.EXCLUDED)],
        id="calver-floor-exclude",
    ),
    pytest.param(
        BUILDS,
        ["build-9", "build-10", "build-010", "build-x", "latest"],
        {},
        "build-10",
        [
            ("build-x", Reason.NOT_A_VERSION),
            ("latest", Reason.NOT_A_VERSION),
        ],
        id="regex-numeric",
    ),
    pytest.param(
        VersionPolicy(kind="regex", pattern=r"^(?P<version>.+)-alpine$", order="semver", range="^1"),
        ["1.2.0-alpine", "1.10.0-alpine", "2.0.0-alpine", "1.11.0", "1.12.0-rc.1-alpine"],
        {},
        "1.10.0-alpine",
        [
            ("2.0.0-alpine", Reason.OUT_OF_RANGE),
            ("1.12.0-rc.1-alpine", Reason.PRERELEASE),
            ("1.11.0", Reason.NOT_A_VERSION),
        ],
        id="regex-semver-variant",
    ),
    pytest.param(
        VersionPolicy(kind="regex", pattern=r"^nightly-(?P<version>\d{8}T\d{6})$", order="lexical"),
        ["nightly-20261103T010203", "nightly-20261104T000000", "nightly-2026"],
        {},
        "nightly-20261104T000000",
        [("nightly-2026", Reason.NOT_A_VERSION)],
        id="regex-lexical",
    ),
    pytest.param(
        VersionPolicy(kind="regex", pattern="(?P<version>.+)", order="lexical"),
        [SIG, "a", "b"],
        {},
        "b",
        [(SIG, Reason.NOT_A_VERSION)],
        id="regex-never-a-cosign-tag",
    ),
    pytest.param(SEMVER, [], {}, None, [], id="no-tags"),
    pytest.param(
        SEMVER,
        ["1.0.0", "1.0.0", "latest", "latest"],
        {},
        "1.0.0",
        [("latest", Reason.NOT_A_VERSION)],
        id="duplicates",
    ),
]


@pytest.mark.parametrize(("policy", "tags", "sets", "head", "reasons"), SELECTIONS)
def test_select_head(
    policy: VersionPolicy, tags: list[str], sets: dict[str, Any], head: str | None, reasons: list[Any]
) -> None:
    selection = select_head(policy, tags, **sets)
    assert (selection.head_tag, rejected(selection), selection.omitted) == (head, reasons, 0)
    shuffled = random.Random(7).sample(tags, len(tags))
    assert select_head(policy, shuffled, **sets) == selection


def test_the_head_is_a_version_value() -> None:
    selection = select_head(VersionPolicy.parse("~1.4"), ["v1.4.2_b.1", "1.5.0"])
    assert selection.head is not None
    assert (selection.head.tag, selection.head.text, selection.head.build) == (
        "v1.4.2_b.1",
        "v1.4.2_b.1",
        "b.1",
    )
    assert selection.head.release == (1, 4, 2)
    assert selection.rejected[0].version == VersionPolicy.parse("~1.4").version("1.5.0")


def test_rejections_are_bounded_newest_first() -> None:
    tags = [f"2.{i}.0" for i in range(10)] + ["1.0.0", "latest", "edge"]
    selection = select_head(VersionPolicy.parse("^1"), tags, limit=3)
    assert selection.head_tag == "1.0.0"
    assert rejected(selection) == [
        ("2.9.0", Reason.OUT_OF_RANGE),
        ("2.8.0", Reason.OUT_OF_RANGE),
        ("2.7.0", Reason.OUT_OF_RANGE),
    ]
    assert selection.omitted == 7 + 2
    nothing = select_head(VersionPolicy.parse("^1"), tags, limit=0)
    assert (nothing.head_tag, nothing.rejected, nothing.omitted) == ("1.0.0", (), 12)
    with pytest.raises(ValueError, match="limit"):
        select_head(VersionPolicy.parse("^1"), tags, limit=-1)


def test_rejected_versions_older_than_the_head_are_not_listed() -> None:
    selection = select_head(
        VersionPolicy(kind="semver", exclude=["^1\\.0"]), ["1.0.5", "1.1.0", "0.9.0-rc.1"]
    )
    assert (selection.head_tag, rejected(selection)) == ("1.1.0", [])


# -- never backwards --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "current", "candidate", "expected"),
    [
        (SEMVER, None, "1.0.0", Step.UPGRADE),
        (SEMVER, "1.0.0", "1.0.1", Step.UPGRADE),
        (SEMVER, "1.9.0", "1.10.0", Step.UPGRADE),
        (SEMVER, "1.0.1", "1.0.0", Step.DOWNGRADE),
        (SEMVER, "1.4.2", "v1.4.2+build.7", Step.SAME),
        (SEMVER, "1.4.2+build.7", "1.4.2_build.9", Step.SAME),
        (SEMVER, "1.5.0-rc.1", "1.5.0", Step.UPGRADE),
        (SEMVER, "1.5.0", "1.5.0-rc.1", Step.DOWNGRADE),
        (SEMVER, "1.5.0-rc.2", "1.5.0-rc.10", Step.UPGRADE),
        (SEMVER, "latest", "1.0.0", Step.UNKNOWN),
        (SEMVER, "1.0.0", "latest", Step.UNKNOWN),
        (SEMVER, None, "latest", Step.UNKNOWN),
        (NUMERIC, "0042", "42", Step.SAME),
        (NUMERIC, "9", "10", Step.UPGRADE),
        (NUMERIC, "10", "9", Step.DOWNGRADE),
        (CALVER, "20261103", "2026.11.03-1", Step.UPGRADE),
        (CALVER, "2026.11.3", "20261103", Step.SAME),
        (CALVER, "2026.12.01", "2026.11.30", Step.DOWNGRADE),
        (BUILDS, "build-99", "build-100", Step.UPGRADE),
    ],
)
def test_move(policy: VersionPolicy, current: str | None, candidate: str, expected: Step) -> None:
    assert move(policy, current, candidate) is expected


# -- properties: the head is the maximum of the allowed versions, whatever happened to the tags ---------

# Range -> which releases it holds, written independently of the library and of the module.
POLICY_RANGES = {
    None: lambda r: True,
    "^1": lambda r: r[0] == 1,
    "~1.2": lambda r: r[:2] == (1, 2),
    ">=1.2 <3": lambda r: (1, 2, 0) <= r < (3, 0, 0),
    "1.x || ^3": lambda r: r[0] in (1, 3),
    "^0.2": lambda r: r[:2] == (0, 2),
    "<1.1.1": lambda r: r < (1, 1, 1),
}


@st.composite
def semver_tag(draw: st.DrawFn) -> tuple[str, tuple[Any, ...], tuple[Any, ...], bool, tuple[int, int, int]]:
    """A tag, its precedence (computed here, not by the module), its identity, whether it is a
    pre-release, and its release."""
    release = (draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    pre = draw(st.one_of(st.none(), st.tuples(st.sampled_from(["alpha", "beta", "rc"]), st.integers(0, 11))))
    build = draw(st.one_of(st.just(""), st.sampled_from(["b.1", "b.2", "x"])))
    prefix = draw(st.sampled_from(["", "v"]))
    separator = draw(st.sampled_from(["+", "_"]))
    tag = prefix + ".".join(map(str, release))
    if pre is not None:
        tag += f"-{pre[0]}.{pre[1]}"
    if build:
        tag += separator + build
    # semver: a release after its pre-releases; identifiers: alphabetical label, then number.
    precedence = (*release, 1 if pre is None else 0, pre or ("", 0))
    return tag, precedence, (precedence, build), pre is not None, release


@settings(max_examples=400, deadline=None)
@given(
    st.lists(semver_tag(), min_size=1, max_size=25, unique_by=lambda t: t[0]),
    st.lists(st.tuples(st.booleans(), st.integers(0, 24)), max_size=60),
    st.sets(st.integers(0, 24), max_size=6),
    st.sampled_from(sorted(POLICY_RANGES, key=str)),
    st.booleans(),
    st.one_of(st.none(), st.sets(st.integers(0, 24), max_size=20)),
)
def test_the_head_is_the_newest_allowed_version(
    pool: list[Any],
    operations: list[tuple[bool, int]],
    bad_indexes: set[int],
    range_text: str | None,
    prereleases: bool,
    allowed_indexes: set[int] | None,
) -> None:
    # Insertions and deletions in any order; the registry lists what is left, in insertion order.
    present: dict[str, None] = {}
    for insert, index in operations:
        tag = pool[index % len(pool)][0]
        if insert:
            present[tag] = None
        else:
            present.pop(tag, None)
    bad = {pool[i % len(pool)][0] for i in bad_indexes}
    allowed = None if allowed_indexes is None else {pool[i % len(pool)][0] for i in allowed_indexes}
    policy = VersionPolicy(kind="semver", range=range_text, prereleases=prereleases)

    selection = select_head(policy, list(present), bad=bad, allowed=allowed, limit=1000)

    facts = {tag: (precedence, identity, pre, release) for tag, precedence, identity, pre, release in pool}
    bad_identities = {facts[t][1] for t in bad}
    allowed_identities = None if allowed is None else {facts[t][1] for t in allowed}

    def allows(tag: str) -> bool:
        _, identity, pre, release = facts[tag]
        return (
            (prereleases or not pre)
            and POLICY_RANGES[range_text](release)
            and identity not in bad_identities
            and (allowed_identities is None or identity in allowed_identities)
        )

    def newest_first(tag: str) -> tuple[Any, ...]:
        return (facts[tag][0], -len(tag), tag)

    candidates = [t for t in present if allows(t)]
    expected = max(candidates, key=newest_first, default=None)
    assert selection.head_tag == expected
    above = {t for t in present if expected is None or newest_first(t) > newest_first(expected)}
    assert {r.tag for r in selection.rejected} == above
    assert [newest_first(r.tag) for r in selection.rejected] == sorted(map(newest_first, above), reverse=True)
    assert selection.omitted == 0
    if expected is not None:
        # Whatever the head, no allowed tag is an upgrade from it.
        assert all(move(policy, expected, t) is not Step.UPGRADE for t in candidates)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 300), max_size=40),
    st.sampled_from(["", "0", "00"]),
    st.one_of(st.none(), st.integers(0, 300)),
    st.sets(st.integers(0, 300), max_size=10),
)
def test_the_numeric_head_is_the_largest_allowed_number(
    numbers: list[int], padding: str, ceiling: int | None, bad: set[int]
) -> None:
    tags = [padding + str(n) for n in numbers]
    policy = VersionPolicy(kind="numeric", ceiling=None if ceiling is None else str(ceiling))
    selection = select_head(policy, tags, bad={str(n) for n in bad})
    allowed = [n for n in numbers if (ceiling is None or n <= ceiling) and n not in bad]
    assert selection.head_tag == (None if not allowed else padding + str(max(allowed)))
