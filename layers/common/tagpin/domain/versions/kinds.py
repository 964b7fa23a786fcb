"""The words of a version policy: its kinds, how a ``regex`` policy orders, why a tag is not
chosen, and the error of a policy that cannot be read (``tagpin.domain.versions.policy``)."""

from __future__ import annotations

from enum import StrEnum


class InvalidPolicy(ValueError):
    """A compact policy that cannot be read; the message names the part at fault."""


class PolicyKind(StrEnum):
    """What the versions of a channel look like."""

    DIGEST = "digest"  # follow one floating tag's digest (tagpin without channels): nothing to choose
    SEMVER = "semver"  # 1.4.2, v1.4.2, 1.5.0-rc.1
    NUMERIC = "numeric"  # build numbers: 123, 0042
    CALVER = "calver"  # dates: 2026.11.03, 20261103-1
    REGEX = "regex"  # a pattern extracts the version from the tag, ordered by ``order``


class Order(StrEnum):
    """How a ``regex`` policy orders what its pattern extracted."""

    SEMVER = "semver"
    NUMERIC = "numeric"
    CALVER = "calver"
    LEXICAL = "lexical"  # code-point order: only for fixed-width text such as timestamps


class Reason(StrEnum):
    """Why a tag was not chosen; checked in this order, the first that applies is reported."""

    NOT_A_VERSION = "not_a_version"  # not a version of the policy's kind (latest, a cosign tag, ...)
    EXCLUDED = "excluded"  # matches an ``exclude`` pattern
    NOT_INCLUDED = "not_included"  # matches none of the ``include`` patterns
    PRERELEASE = "prerelease"  # a pre-release, and the policy takes none
    OUT_OF_RANGE = "out_of_range"  # outside ``range``
    BELOW_FLOOR = "below_floor"
    ABOVE_CEILING = "above_ceiling"
    BAD = "bad"  # marked bad (a failed rollout)
    NOT_VERIFIED = "not_verified"  # not in the allowed set (e.g. not verified in the previous stage)
