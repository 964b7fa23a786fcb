"""``VersionPolicy``: which tags of an image a version channel may move to.

A policy is validated and compiled once (regular expressions, the range table, floor and ceiling
read as versions), then asked about each tag: ``version`` reads a tag as a version of the policy's
kind, ``screen`` says why the policy refuses a version, if it does. Choosing among the versions
(and the bad and verified sets, which are state, not policy) is ``tagpin.domain.versions.selection``.

Pre-releases: with ``prereleases`` false (the default) none is ever chosen. With it true, a
pre-release is in range when the release it leads to is (``1.5.0-rc.1`` is in ``^1``, ``2.0.0-rc.1``
is not: with ``^1``, an rc of the next major never slips in); ``floor`` and ``ceiling`` bound it
exactly (``floor: 2.0.0-rc.1`` starts from that rc). This is npm's ``includePrerelease`` but at
the ends of comparators written in full: npm admits ``2.0.0-rc.1`` in ``<2.0.0`` (not in ``<2``)
and refuses ``1.2.0-rc.1`` in ``>=1.2.0``; here the first is out of range and the second in it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Annotated, Any, Self

from pydantic import AfterValidator, Field, PrivateAttr, ValidationError, model_validator

from tagpin.domain.model import Strict
from tagpin.domain.versions.kinds import InvalidPolicy, Order, PolicyKind, Reason
from tagpin.domain.versions.ranges import InvalidRange, SemverRange
from tagpin.domain.versions.tags import (
    MAX_TAG_LENGTH,
    Reading,
    Version,
    is_artefact,
    read_calver,
    read_lexical,
    read_numeric,
    read_semver,
)

__all__ = ["InvalidPolicy", "Order", "PolicyKind", "Reason", "VersionPolicy"]

Reader = Callable[[str], Reading | None]

_READERS = {
    Order.SEMVER: read_semver,
    Order.NUMERIC: read_numeric,
    Order.CALVER: read_calver,
    Order.LEXICAL: read_lexical,
}
_OWN_ORDER = {
    PolicyKind.SEMVER: Order.SEMVER,
    PolicyKind.NUMERIC: Order.NUMERIC,
    PolicyKind.CALVER: Order.CALVER,
}
DEFAULT_REGEX_ORDER = Order.NUMERIC
_FORMS = "digest, semver[:RANGE], numeric, calver, regex[/ORDER]:PATTERN, or a semver range such as ~1.4"


def _reader(order: Order, pattern: str | None) -> Reader:
    read = _READERS[order]
    if pattern is None:
        return read  # each reader refuses what is longer than a tag can be
    search = re.compile(pattern).search

    def extract(tag: str) -> Reading | None:
        if len(tag) > MAX_TAG_LENGTH or is_artefact(tag) or (match := search(tag)) is None:
            return None
        text = match["version"]
        return None if text is None else read(text)

    return extract


class Rules:
    """A ``VersionPolicy`` compiled: how to read a tag, and the checks, ready for thousands of tags.

    A plain object rather than the pydantic model's private attributes: reading one of those goes
    through ``BaseModel.__getattr__``, about 1 µs each, which alone would cost 60 ms over 10,000 tags.
    ``read`` and ``refusal`` are the fast path (tuples, see ``tags.Reading``); ``version`` and
    ``screen`` the same with ``Version`` values.
    """

    __slots__ = ("ceiling", "exclude", "floor", "include", "prereleases", "range", "read")

    def __init__(
        self,
        *,
        read: Reader,
        include: tuple[re.Pattern[str], ...],
        exclude: tuple[re.Pattern[str], ...],
        prereleases: bool,
        semver_range: SemverRange | None,
        floor: Version | None,
        ceiling: Version | None,
    ) -> None:
        self.read: Reader = read  # tag -> Reading, or None when the tag is not a version
        self.include = include
        self.exclude = exclude
        self.prereleases = prereleases
        self.range = semver_range
        self.floor = None if floor is None else floor.key
        self.ceiling = None if ceiling is None else ceiling.key

    def version(self, tag: str) -> Version | None:
        """``tag`` read as a version of the policy's kind; None when it is not one."""
        reading = self.read(tag)
        return None if reading is None else Version.of(tag, reading)

    def screen(self, version: Version) -> Reason | None:
        """Why the policy refuses ``version`` (the first reason in ``Reason``'s order), or None."""
        return self.refusal(version.tag, version.key, version.prerelease)

    def refusal(self, tag: str, key: tuple[Any, ...], prerelease: bool) -> Reason | None:
        """``screen`` for a tag read by ``read``, without building a ``Version``."""
        for pattern in self.exclude:  # loops, not any(): a generator per tag costs more than a search
            if pattern.search(tag):
                return Reason.EXCLUDED
        if self.include:
            for pattern in self.include:
                if pattern.search(tag):
                    break
            else:
                return Reason.NOT_INCLUDED
        if prerelease and not self.prereleases:
            return Reason.PRERELEASE
        if self.range is not None and not self.range.admits(key[:3]):
            return Reason.OUT_OF_RANGE
        if self.floor is not None and key < self.floor:
            return Reason.BELOW_FLOOR
        if self.ceiling is not None and key > self.ceiling:
            return Reason.ABOVE_CEILING
        return None


def _bound(name: str, text: str | None, order: Order) -> Version | None:
    if text is None:
        return None
    reading = _READERS[order](text)
    if reading is None:
        raise ValueError(f"{name}: {text!r} is not a {order} version")
    return Version.of(text, reading)


def _compiles(value: str) -> str:
    try:
        re.compile(value)
    except re.error as error:
        raise ValueError(f"{value!r} is not a regular expression: {error}") from None
    return value


Pattern = Annotated[str, Field(min_length=1, max_length=512), AfterValidator(_compiles)]


class VersionPolicy(Strict):
    """Which tags a version channel may move to: the newest version that passes every rule."""

    # Build it with VersionPolicy(...), model_validate or parse: the compiled form is made at
    # validation, so a model_copy(update=...) (which pydantic does not validate) cannot change one.

    kind: PolicyKind = Field(
        default=PolicyKind.DIGEST,
        description="`digest`: follow one tag's digest (nothing to choose); `semver`, `numeric`, "
        "`calver`: the tags are versions of that kind; `regex`: `pattern` extracts the version.",
    )
    range: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="npm-style range of releases, e.g. `~1.4`, `^2`, `>=1.2 <2`, `1.x`, `^1 || ^2` "
        "(kind `semver`, or `regex` with order `semver`).",
    )
    prereleases: bool = Field(
        default=False,
        description="Also choose pre-releases (`1.5.0-rc.1`) of the releases in `range`.",
    )
    include: list[Pattern] = Field(
        default_factory=list,
        description="Regular expressions (searched in the tag, anchor with ^ and $): a tag must match "
        "one. Empty: every tag.",
    )
    exclude: list[Pattern] = Field(
        default_factory=list, description="Regular expressions: a tag that matches one is never chosen."
    )
    floor: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TAG_LENGTH,
        description="Never choose a version below this one (same kind, inclusive).",
    )
    ceiling: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TAG_LENGTH,
        description="Never choose a version above this one (same kind, inclusive).",
    )
    pattern: Pattern | None = Field(
        default=None,
        description="Kind `regex`: searched in each tag; its group `version` is the version, e.g. "
        r"`^build-(?P<version>\d+)$`.",
    )
    order: Order | None = Field(
        default=None,
        description="Kind `regex`: how to order what `pattern` extracted (`semver`, `numeric`, "
        "`calver`, `lexical`); default `numeric`.",
    )

    _rules: Rules | None = PrivateAttr(default=None)

    @property
    def effective_order(self) -> Order | None:
        """How versions are ordered; None for ``digest``."""
        if self.kind is PolicyKind.REGEX:
            return self.order or DEFAULT_REGEX_ORDER
        return _OWN_ORDER.get(self.kind)

    @property
    def chooses(self) -> bool:
        """False for ``digest``: there is one tag, and nothing to choose."""
        return self.kind is not PolicyKind.DIGEST

    @model_validator(mode="after")
    def _compile(self) -> Self:
        self._check_fields()
        order = self.effective_order
        if order is None:
            return self
        try:
            semver_range = None if self.range is None else SemverRange(self.range)
        except InvalidRange as error:
            raise ValueError(f"range: {error}") from None
        floor, ceiling = _bound("floor", self.floor, order), _bound("ceiling", self.ceiling, order)
        if floor is not None and ceiling is not None and floor.key > ceiling.key:
            raise ValueError(
                f"floor {self.floor!r} is above ceiling {self.ceiling!r}: nothing could be chosen"
            )
        self._rules = Rules(
            read=_reader(order, self.pattern),
            include=tuple(re.compile(p) for p in self.include),
            exclude=tuple(re.compile(p) for p in self.exclude),
            prereleases=self.prereleases,
            semver_range=semver_range,
            floor=floor,
            ceiling=ceiling,
        )
        return self

    def __eq__(self, other: object) -> bool:
        # The fields only: pydantic would also compare the private compiled form, an object made
        # from the fields that has no equality of its own.
        if not isinstance(other, VersionPolicy):
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        # Hashable despite its list fields, so that a compiled policy can be kept per policy.
        return hash(self.model_dump_json())

    @property
    def rules(self) -> Rules:
        """The policy compiled, for asking about many tags. Raises ValueError for ``digest``."""
        if self._rules is None:
            raise ValueError("a digest policy follows one tag's digest: its tags are not versions")
        return self._rules

    def version(self, tag: str) -> Version | None:
        """``tag`` read as a version of this policy's kind; None when it is not one."""
        return self.rules.version(tag)

    def screen(self, version: Version) -> Reason | None:
        """Why this policy refuses ``version``; see ``Rules.screen``."""
        return self.rules.screen(version)

    def _check_fields(self) -> None:
        """Each field applies to some kinds only: say so rather than ignore it."""
        if self.kind is PolicyKind.DIGEST:
            for name in (
                "range",
                "floor",
                "ceiling",
                "pattern",
                "order",
                "include",
                "exclude",
                "prereleases",
            ):
                if getattr(self, name):
                    raise ValueError(
                        f"{name}: a digest policy follows one tag's digest; {name} does not apply"
                    )
            return
        if self.kind is PolicyKind.REGEX and self.pattern is None:
            raise ValueError(
                r"pattern: kind regex needs a pattern with a group version, e.g. ^build-(?P<version>\d+)$"
            )
        if self.kind is not PolicyKind.REGEX:
            for name in ("pattern", "order"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name}: applies to kind regex only (kind {self.kind} has its own order)"
                    )
        if self.pattern is not None and "version" not in re.compile(self.pattern).groupindex:
            raise ValueError(
                rf"pattern: {self.pattern!r} has no group named version: write (?P<version>...) around the "
                r"part to order, e.g. ^build-(?P<version>\d+)$"
            )
        if self.effective_order is not Order.SEMVER:
            for name in ("range", "prereleases"):
                if getattr(self, name):
                    raise ValueError(
                        f"{name}: applies to semver versions only (kind semver, or regex with order "
                        f"semver); bound {self.effective_order} versions with floor and ceiling"
                    )

    @property
    def text(self) -> str:
        """The policy as one line that ``parse`` reads back to an equal policy: the compact form
        where the policy has one, else its fields as compact JSON. A channel's name when none is
        given (``tagpin.domain.channels``), so it is stable for a given policy."""
        if not (self.prereleases or self.include or self.exclude or self.floor or self.ceiling):
            if self.kind is PolicyKind.REGEX:
                return f"regex/{self.order}:{self.pattern}" if self.order else f"regex:{self.pattern}"
            if self.kind is PolicyKind.SEMVER and self.range is not None:
                return f"semver:{self.range}"
            return str(self.kind)
        fields = self.model_dump(mode="json", exclude_defaults=True)
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str) -> VersionPolicy:
        """The compact form used in annotations and on the command line.

        ``digest``, ``semver``, ``semver:~1.4``, ``numeric``, ``calver``,
        ``regex:^build-(?P<version>\\d+)$`` (order numeric), ``regex/semver:^(?P<version>.+)-alpine$``,
        or a bare range (``~1.4``, ``^2``, ``>=1.2 <2``) meaning ``semver:<range>``. The other fields
        (include, exclude, floor, ceiling, prereleases) have no compact form: a JSON object of the
        fields (``{"kind": "semver", "range": "~1.4", "exclude": ["-alpine$"]}``) gives them all.
        Raises InvalidPolicy.
        """
        text = text.strip()
        try:
            if text.startswith("{"):
                return cls.model_validate_json(text)
            return cls._from_compact(text)
        except ValidationError as error:
            raise InvalidPolicy(f"{text!r}: {_describe(error)}") from None

    @classmethod
    def _from_compact(cls, text: str) -> VersionPolicy:
        head, colon, argument = text.partition(":")
        name, slash, order = head.partition("/")
        if name not in PolicyKind:
            if not text:
                raise InvalidPolicy(f"empty version policy: expected {_FORMS}")
            try:
                return cls(kind=PolicyKind.SEMVER, range=text)
            except ValidationError as error:
                raise InvalidPolicy(f"{text!r}: expected {_FORMS}; as a range, {_describe(error)}") from None
        kind = PolicyKind(name)
        if slash and kind is not PolicyKind.REGEX:
            raise InvalidPolicy(f"{text!r}: only regex takes an order (regex/ORDER:PATTERN)")
        if slash and order not in Order:
            raise InvalidPolicy(f"{text!r}: unknown order {order!r} (one of {', '.join(Order)})")
        if kind is PolicyKind.REGEX:
            if not argument:
                raise InvalidPolicy(rf"{text!r}: regex needs a pattern, e.g. regex:^build-(?P<version>\d+)$")
            return cls(kind=kind, pattern=argument, order=Order(order) if slash else None)
        if kind is PolicyKind.SEMVER and colon:
            return cls(kind=kind, range=argument)
        if colon:
            raise InvalidPolicy(f"{text!r}: {kind} takes no argument")
        return cls(kind=kind)


def _describe(error: ValidationError) -> str:
    """Pydantic's errors as one line, each led by the field it is about."""
    parts = []
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where and not message.startswith(where) else message)
    return "; ".join(parts)
