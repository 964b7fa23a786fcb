"""``Pin``: the reference a file is made to say: a repository, its tag (kept readable, as tagpin
writes live workloads) and the digest the tag pointed to.

A revert writes back what a file said before tagpin's commit; when that was the floating tag
alone (no digest), the pin is *unpinned* (``pinned`` False): the editors write the tag and take
out the digest fields tagpin had added."""

from __future__ import annotations

from dataclasses import dataclass

from tagpin.domain.refs import Digest, ImageRef, InvalidReference


@dataclass(frozen=True)
class Pin:
    image: ImageRef  # registry/repository:tag@digest; a revert's may have no digest

    def __post_init__(self) -> None:
        if self.image.tag is None:
            raise ValueError(f"a reference written to Git needs a tag: {self.image}")

    @property
    def pinned(self) -> bool:
        """False for a revert to the floating tag alone (what the file said before)."""
        return self.image.digest is not None

    @classmethod
    def of(cls, image: ImageRef | str, digest: Digest) -> Pin:
        ref = ImageRef.parse(image) if isinstance(image, str) else image
        return cls(ref.with_digest(digest))

    @property
    def name(self) -> str:
        """``registry/repository``: what a file's reference is matched by."""
        return self.image.name

    @property
    def tag(self) -> str:
        assert self.image.tag is not None
        return self.image.tag

    @property
    def digest(self) -> str:
        assert self.image.digest is not None
        return self.image.digest

    @property
    def tag_at_digest(self) -> str:
        """``1.4@sha256:...``: a tag field that pins (``1.4`` when unpinned)."""
        return f"{self.tag}@{self.digest}" if self.pinned else self.tag

    def written_as(self, name_text: str) -> str:
        """The whole reference, with the repository written as the file wrote it (``nginx``
        stays ``nginx``, not ``docker.io/library/nginx``)."""
        return f"{name_text}:{self.tag_at_digest}"

    def matches(self, text: str) -> bool:
        """True when ``text`` names this repository (any tag or digest, any spelling of it)."""
        try:
            return ImageRef.parse(text).name == self.name
        except InvalidReference:
            return False


def name_part(reference: str) -> str:
    """The repository as written in ``reference``: without ``@digest`` and ``:tag``."""
    name = reference.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return name[: len(name) - len(last)] + last.split(":", 1)[0]
