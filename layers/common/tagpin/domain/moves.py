"""A move: a followed image going to one digest, as tagpin noticed it.

The value every gate of admission (``tagpin.usecases.admission``) is asked about, whichever path
asks: the consumer's change (``Move.of``), the dry run, ``tagpin plan`` (a digest just resolved),
the console (the tag's recorded digest).
"""

from __future__ import annotations

from dataclasses import dataclass

from tagpin.domain.channels import pinned_source
from tagpin.domain.messages import Change, TargetChange, Trigger
from tagpin.domain.refs import Digest


@dataclass(frozen=True)
class Move:
    image: str  # the followed tag (``registry/repository:tag``), or a version channel's key
    digest: Digest  # validated: a text that is no digest is refused here (``InvalidReference``)
    observed_at: int  # when it was seen (epoch ms, tagpin's clock): orders moves of one image
    trigger: Trigger
    changed_at: int | None = None  # when the tag moved to ``digest``
    correlation_id: str | None = None
    tag: str | None = None  # a version channel's chosen version

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", Digest(self.digest))

    @classmethod
    def of(cls, change: Change | TargetChange) -> Move:
        """The move a change (or one target's part of it) carries."""
        return cls(
            image=change.image,
            digest=change.digest,
            observed_at=change.observed_at,
            trigger=change.trigger,
            changed_at=change.changed_at,
            correlation_id=change.correlation_id,
            tag=change.tag,
        )

    @property
    def source(self) -> str:
        """What a target is pinned to before ``@digest``: the tag, or the channel's version."""
        return pinned_source(self.image, self.tag)
