"""Channels: a followed repository whose tag is chosen by a version policy (``1.4.2`` -> ``1.4.3``)
instead of one floating tag (``:stable``) whose digest is followed.

Everything tagpin keeps about a followed thing is keyed by one string (state, index, changes,
promotions). A followed tag's key is its canonical reference ``registry/repository:tag``; a
channel's is ``registry/repository@<name>``, where the name is the configured channel name
(``stable``, ``candidate``) or, when there is none (a workload annotated with its policy), the
policy's own text (``semver:~1.4``). A followed tag never contains ``@`` (it has no digest), so the
two never collide, and every channel of a repository shares the prefix ``registry/repository@``:
a push notification for ``repository:1.4.3`` finds them without listing anything
(``tagpin.domain.shards`` puts them in one shard).

What a channel's targets run is ``registry/repository:<head>@<digest>``: the chosen tag stays
readable, the digest is what runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tagpin.domain.refs import ImageRef, InvalidReference, is_digest

SEPARATOR = "@"
# A configured channel's name: short, and never one of the policy kinds (which name policies).
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"
_NAME = re.compile(NAME_PATTERN)
MAX_KEY = 512  # the longest key a change message carries (``Change.image``)


def is_channel(key: str) -> bool:
    """A channel's key (not a tag's, nor a reference pinned to a digest)."""
    if SEPARATOR not in key:
        return False
    return not is_digest(key.rsplit(SEPARATOR, 1)[1])


def repository_part(key: str) -> str:
    """``registry/repository`` of a channel key; a tag key unchanged."""
    return key.split(SEPARATOR, 1)[0] if is_channel(key) else key


def repository_of(key: str) -> ImageRef:
    """The repository a followed tag or a channel is of (its tag, if any, kept: only ``name`` is
    meant to be read)."""
    channel = ChannelKey.parse(key)
    return ImageRef.parse(key) if channel is None else channel.repository


def pinned_source(key: str, tag: str | None) -> str:
    """What a target of ``key`` is pinned to, before ``@digest``: a followed tag's own reference, or
    a channel's repository at the version ``tag`` it chose."""
    channel = ChannelKey.parse(key)
    if channel is None:
        return key
    if tag is None:
        raise ValueError(f"{key}: a channel's change names the version it chose")
    return str(channel.at(tag))


@dataclass(frozen=True)
class ChannelKey:
    repository: ImageRef  # registry and repository; no tag, no digest
    name: str  # the configured name, or the policy's text

    def __post_init__(self) -> None:
        if self.repository.tag is not None or self.repository.digest is not None:
            raise ValueError(f"a channel follows a repository, not {self.repository}")
        if not self.name or "\n" in self.name:
            raise ValueError("a channel needs a name (or a policy)")
        if len(str(self)) > MAX_KEY:
            raise ValueError(f"channel key longer than {MAX_KEY} characters: name the channel")

    @classmethod
    def parse(cls, key: str) -> ChannelKey | None:
        """The channel a key names, or None for a followed tag's key."""
        if not is_channel(key):
            return None
        repository, _, name = key.partition(SEPARATOR)
        try:
            ref = ImageRef.parse(repository)
        except InvalidReference as exc:
            raise ValueError(f"{key!r}: {exc}") from None
        return cls(ImageRef(ref.registry, ref.repository, None, None), name)

    @property
    def named(self) -> bool:
        """True when the name is a configured channel name, not a policy's text (a policy kind
        such as ``numeric`` is a policy; a channel may not be named after one)."""
        from tagpin.domain.versions import PolicyKind  # not at import: versions -> config -> here

        return bool(_NAME.fullmatch(self.name)) and self.name not in set(PolicyKind)

    def at(self, tag: str) -> ImageRef:
        """The repository at ``tag`` (a version this channel chose)."""
        return self.repository.with_tag(tag)

    def __str__(self) -> str:
        return f"{self.repository.name}{SEPARATOR}{self.name}"


class FollowedKey(str):
    """What tagpin follows, by the key everything about it is kept under (the state, the index, the
    changes, the promotions): a followed tag's canonical reference ``registry/repository:tag``, or
    a version channel's key ``registry/repository@<name>`` (``ChannelKey``), which is no image
    reference. A ``str`` like ``Digest``: stored, sent, logged and compared as the text it is;
    typed, so a module that takes one cannot be handed an image reference or a digest by mistake.
    Built where the text enters (a message, a state item, the configuration, the CLI); a field
    typed ``FollowedKey`` in a pydantic model refuses a text under 3 or over ``MAX_KEY`` characters,
    naming the field.
    """

    __slots__ = ()

    def __new__(cls, text: object) -> FollowedKey:
        if isinstance(text, FollowedKey):
            return text
        if not isinstance(text, str) or not 3 <= len(text) <= MAX_KEY:
            raise ValueError(f"a followed tag or channel key has 3 to {MAX_KEY} characters, not {text!r:.80}")
        return super().__new__(cls, text)

    @classmethod
    def of(cls, followed: ImageRef | ChannelKey) -> FollowedKey:
        """The key of a followed tag (its tag kept, a digest dropped) or of a channel."""
        return cls(followed.tagged if isinstance(followed, ImageRef) else str(followed))

    @property
    def channel(self) -> ChannelKey | None:
        """The channel this is, or None for a followed tag."""
        return ChannelKey.parse(self)

    @property
    def repository(self) -> ImageRef:
        """The repository followed (only ``name`` is meant to be read; ``repository_of``)."""
        return repository_of(self)

    def source(self, tag: str | None) -> str:
        """What a target is pinned to before ``@digest`` (``pinned_source``)."""
        return pinned_source(self, tag)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(
            cls,
            core_schema.str_schema(),  # the length checked by ``__new__``: the JSON schema a str's
            serialization=core_schema.to_string_ser_schema(),
        )
