"""A move: a followed image going to one digest, as tagpin noticed it.

The value every gate of admission (``tagpin.usecases.admission``) is asked about, whichever path
asks: the consumer's change (``Move.of``), the dry run, ``tagpin plan`` (a digest just resolved),
the console (the tag's recorded digest).
"""

from __future__ import annotations

from dataclasses import dataclass

from tagpin.domain.channels import pinned_source
from tagpin.domain.messages import Change, TargetChange, Trigger, Verification, VerificationKind
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
    def of(cls, change: Change | TargetChange | Verification) -> Move:
        """The move a change (or one target's part of it, or a verification of it) carries; a
        verification sent before triggers were carried is the verifier's."""
        if isinstance(change, Verification):
            return cls(
                change.image,
                change.digest,
                change.observed_at,
                change.trigger or Trigger.VERIFY,
                correlation_id=change.correlation_id,
            )
        return cls(
            image=change.image,
            digest=change.digest,
            observed_at=change.observed_at,
            trigger=change.trigger,
            changed_at=change.changed_at,
            correlation_id=change.correlation_id,
            tag=change.tag,
        )

    def verification(
        self,
        kind: VerificationKind,
        *,
        target_id: str | None = None,
        applied_at: int | None = None,
        attempt: int = 0,
    ) -> Verification:
        """A verification of this move (a rollout to look at again, a wave to advance, a deferred
        target to retry, an approval request to lapse)."""
        return Verification(
            kind=kind,
            image=self.image,
            digest=self.digest,
            observed_at=self.observed_at,
            target_id=target_id,
            applied_at=applied_at,
            attempt=attempt,
            trigger=self.trigger,
            correlation_id=self.correlation_id,
        )

    def change(self, trigger: Trigger, round: str) -> Change:
        """This move sent again as a change (the next wave, a deferred retry, an approved wave):
        ``round`` joins only the queue's deduplication id."""
        return Change(
            image=self.image,
            digest=self.digest,
            observed_at=self.observed_at,
            trigger=trigger,
            correlation_id=self.correlation_id,
            round=round,
            changed_at=self.changed_at,
            tag=self.tag,
        )

    @property
    def source(self) -> str:
        """What a target is pinned to before ``@digest``: the tag, or the channel's version."""
        return pinned_source(self.image, self.tag)
