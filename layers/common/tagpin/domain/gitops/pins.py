"""``Pin``: the reference a file is made to say: a repository, its tag (kept readable, as tagpin
writes live workloads) and the digest the tag pointed to."""

from __future__ import annotations

from dataclasses import dataclass

from tagpin.domain.refs import ImageRef, InvalidReference


@dataclass(frozen=True)
class Pin:
    image: ImageRef  # registry/repository:tag@digest, both tag and digest set

    def __post_init__(self) -> None:
        if self.image.tag is None or self.image.digest is None:
            raise ValueError(f"a pin needs a tag and a digest: {self.image}")

    @classmethod
    def of(cls, image: ImageRef | str, digest: str) -> Pin:
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
        """``1.4@sha256:...``: a tag field that pins."""
        return f"{self.tag}@{self.digest}"

    def written_as(self, name_text: str) -> str:
        """The whole reference, with the repository written as the file wrote it (``nginx``
        stays ``nginx``, not ``docker.io/library/nginx``)."""
        return f"{name_text}:{self.tag}@{self.digest}"

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
