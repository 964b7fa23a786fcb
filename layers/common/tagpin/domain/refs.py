"""Image references, parsed and normalised the way Docker's distribution/reference does it.

``ImageRef.parse`` follows ``ParseNormalizedNamed`` (familiar names such as ``nginx`` become
``docker.io/library/nginx``) and then ``TagNameOnly`` (``latest`` only when there is neither a tag nor
a digest). Unlike ``ParseDockerRef`` it keeps both the tag and the digest of ``name:tag@digest``:
tagpin writes exactly that form into workloads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeGuard

DEFAULT_REGISTRY = "docker.io"
LEGACY_REGISTRY = "index.docker.io"
OFFICIAL_PREFIX = "library/"
DEFAULT_TAG = "latest"
NAME_MAX = 255
TAG_MAX = 128

# The grammar from distribution/reference regexp.go. re.ASCII: Go's \w is ASCII-only.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_REMOTE_NAME = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"

_REFERENCE_RE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_REMOTE_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII
)
_NAME_RE = re.compile(rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_REMOTE_NAME})", re.ASCII)
_TAG_RE = re.compile(_TAG, re.ASCII)
_DIGEST_RE = re.compile(_DIGEST, re.ASCII)
_IDENTIFIER_RE = re.compile(r"[a-f0-9]{64}")
# go-digest: registered algorithms must carry exactly this many lowercase hex characters.
_KNOWN_ALGORITHMS = {"sha256": 64, "sha384": 96, "sha512": 128}


class InvalidReference(ValueError):
    """An image reference that Docker would reject; the message quotes the input."""

    def __init__(self, text: object, problem: str) -> None:
        shown = text if not isinstance(text, str) or len(text) <= 300 else text[:300] + "..."
        super().__init__(f"invalid image reference {shown!r}: {problem}")
        self.text = text
        self.problem = problem


def _digest_problem(text: str) -> str | None:
    if not _DIGEST_RE.fullmatch(text):
        return "digest must look like <algorithm>:<at least 32 hex characters>"
    algorithm, _, hexpart = text.partition(":")
    length = _KNOWN_ALGORITHMS.get(algorithm)
    if length is not None and (len(hexpart) != length or hexpart != hexpart.lower()):
        return f"{algorithm} digest must be exactly {length} lowercase hex characters"
    return None


def _diagnose(remainder: str) -> str:
    """Say which part of a reference that failed the grammar is wrong (best effort)."""
    rest, at, digest = remainder.partition("@")
    if at and (problem := _digest_problem(digest)):
        return f"invalid reference format: {problem}"
    _name, colon, tag = rest.rpartition(":") if ":" in rest.rsplit("/", 1)[-1] else (rest, "", "")
    if colon and not _TAG_RE.fullmatch(tag):
        return r"invalid reference format: tag must match [\w][\w.-]{0,127}"
    return "invalid reference format"


def is_tag(text: object) -> TypeGuard[str]:
    """True for a well-formed tag: ``[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`` (ASCII, at most 128 characters)."""
    return isinstance(text, str) and len(text) <= TAG_MAX and _TAG_RE.fullmatch(text) is not None


def is_digest(text: str) -> bool:
    """True for a well-formed ``algorithm:hex`` digest (sha256 needs exactly 64 lowercase hex)."""
    return isinstance(text, str) and _digest_problem(text) is None


class Digest(str):
    """A content digest, validated where it enters: ``algorithm:hex`` as go-digest accepts it
    (``sha256:`` with exactly 64 lowercase hex characters; the other registered algorithms with
    theirs). A ``str``: written, logged, compared and stored as the text it is; in a pydantic model
    a field typed ``Digest`` refuses anything else, naming the field."""

    __slots__ = ()

    def __new__(cls, text: object) -> Digest:
        if isinstance(text, Digest):
            return text
        problem = _digest_problem(text) if isinstance(text, str) else "digest must be a string"
        if problem is not None:
            raise InvalidReference(text, problem)
        return super().__new__(cls, text)

    @property
    def algorithm(self) -> str:
        return self.partition(":")[0]

    @property
    def hex(self) -> str:
        return self.partition(":")[2]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(
            cls, core_schema.str_schema(), serialization=core_schema.to_string_ser_schema()
        )


# A digest where one may be left unnamed (""): a person's hold is against every digest, a
# channel's event names none, a version held back before it was resolved has none.
OptionalDigest = Literal[""] | Digest


def _split_docker_domain(text: str) -> tuple[str, str]:
    """distribution/reference splitDockerDomain: decide whether the first component is a host."""
    first, slash, rest = text.partition("/")
    if not slash:
        return DEFAULT_REGISTRY, OFFICIAL_PREFIX + text
    if first == LEGACY_REGISTRY:
        domain, remote = DEFAULT_REGISTRY, rest
    elif first == "localhost" or "." in first or ":" in first or first.lower() != first:
        domain, remote = first, rest
    else:
        domain, remote = DEFAULT_REGISTRY, text
    if domain == DEFAULT_REGISTRY and "/" not in remote:
        remote = OFFICIAL_PREFIX + remote
    return domain, remote


@dataclass(frozen=True, slots=True)
class ImageRef:
    """A normalised image reference: ``registry/repository[:tag][@digest]``."""

    registry: str
    repository: str
    tag: str | None = None
    digest: Digest | None = None

    @classmethod
    def parse(cls, text: str) -> ImageRef:
        if not isinstance(text, str):
            raise InvalidReference(text, "must be a string")
        if not text:
            raise InvalidReference(text, "repository name must have at least one component")
        if _IDENTIFIER_RE.fullmatch(text):
            raise InvalidReference(
                text, "a 64-character hexadecimal string is an image ID, not a repository name"
            )
        domain, remainder = _split_docker_domain(text)
        remote = remainder.split(":", 1)[0]
        if remote.lower() != remote:
            raise InvalidReference(text, f"repository name ({remote}) must be lowercase")
        full = f"{domain}/{remainder}"
        match = _REFERENCE_RE.fullmatch(full)
        if match is None:
            if _REFERENCE_RE.fullmatch(full.lower()):
                raise InvalidReference(text, "repository name must be lowercase")
            raise InvalidReference(text, _diagnose(remainder))
        name = _NAME_RE.fullmatch(match["name"])
        if name is None or not name["domain"]:
            # e.g. "a_b.com/x": Go keeps an empty domain here; such a name cannot be pulled.
            raise InvalidReference(text, f"invalid registry host {domain!r}")
        path = name["path"]
        if len(path) > NAME_MAX:
            raise InvalidReference(text, f"repository name must not be more than {NAME_MAX} characters")
        tag, digest = match["tag"], match["digest"]
        if digest is not None and (problem := _digest_problem(digest)):
            raise InvalidReference(text, problem)
        if tag is None and digest is None:
            tag = DEFAULT_TAG
        return cls(name["domain"], path, tag, None if digest is None else Digest(digest))

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def tagged(self) -> str:
        """``registry/repo:tag``: the identity of a followed tag."""
        if self.tag is None:
            raise ValueError(f"image reference {self} has no tag")
        return f"{self.name}:{self.tag}"

    @property
    def familiar(self) -> str:
        """The short form Docker shows (``nginx:1.27``, ``org/app:latest``, ``ghcr.io/o/a:1``)."""
        return familiar(self)

    def with_digest(self, digest: str) -> ImageRef:
        """The same reference pinned to ``digest``; the tag is kept."""
        return replace(self, digest=Digest(digest))

    def with_tag(self, tag: str) -> ImageRef:
        if not isinstance(tag, str) or not _TAG_RE.fullmatch(tag):
            raise InvalidReference(tag, r"tag must match [\w][\w.-]{0,127}")
        return replace(self, tag=tag)

    def __str__(self) -> str:
        out = self.name
        if self.tag is not None:
            out += f":{self.tag}"
        if self.digest is not None:
            out += f"@{self.digest}"
        return out


def familiar(ref: ImageRef) -> str:
    """Docker's FamiliarString: drop ``docker.io/`` and ``library/`` for single-component official images.

    Unlike Docker, ``docker.io/`` is kept when the short form would read as another registry
    (``docker.io/a.b/c`` stays as is), so ``ImageRef.parse(familiar(ref)) == ref`` always holds.
    """
    full = str(ref)
    if ref.registry != DEFAULT_REGISTRY:
        return full
    path = ref.repository
    if path.startswith(OFFICIAL_PREFIX) and "/" not in path[len(OFFICIAL_PREFIX) :]:
        path = path[len(OFFICIAL_PREFIX) :]
    short = path + full[len(ref.name) :]
    return short if _split_docker_domain(short)[0] == DEFAULT_REGISTRY else full
