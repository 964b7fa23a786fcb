"""Messages that cross process boundaries: the change on the queue and the per-target unit of work."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tagpin.refs import is_digest

Trigger = Literal["webhook", "poll", "reconcile", "manual", "ecr"]


class Change(BaseModel):
    """A followed tag was seen pointing at ``digest`` at ``observed_at`` (epoch ms, tagpin's clock).

    The body of every message on the changes queue. ``image`` is the canonical tagged reference
    (``registry/repository:tag``). ``observed_at`` orders observations: an older one never
    replaces a newer one, in the state table or in a cluster.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    image: str = Field(min_length=3, max_length=512)
    digest: str
    observed_at: int = Field(ge=0)
    trigger: Trigger
    correlation_id: str | None = Field(default=None, max_length=256)

    def model_post_init(self, _context: object) -> None:
        if not is_digest(self.digest):
            raise ValueError(f"digest {self.digest!r} is not a valid digest")


class TargetChange(BaseModel):
    """One target to move to one digest: the unit that is made idempotent (key: target_id + digest)."""

    model_config = ConfigDict(frozen=True)

    target_id: str
    cluster: str
    namespace: str
    kind: str
    name: str
    container: str
    image: str
    digest: str
    observed_at: int
    trigger: Trigger
    correlation_id: str | None = None
