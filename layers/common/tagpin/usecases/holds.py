"""A person's hold on a target: ``tagpin hold`` keeps it where it is (every digest, until released or
until a given time); ``tagpin release`` ends a hold, whoever set it (the reconciler holds a target a
person changed outside tagpin, ``tagpin.usecases.reconcile``), and heals the target at once.

A release sends the tag's current digest again as a healing change (``reconcile_run`` set): the
target may have been patched to that digest before the person stepped in, and a plain change would
be answered from the idempotency records instead of being applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest
from tagpin.ports.queues import ChangeQueue
from tagpin.ports.state import State
from tagpin.usecases.followed import Followed


@dataclass(frozen=True)
class Released:
    target: str
    released: bool
    healing: str | None  # the followed image a healing change was sent for


class Holds:
    def __init__(
        self,
        state: State,
        followed: Callable[[], Followed],
        queue: ChangeQueue,
        clock: Callable[[], int],
    ) -> None:
        self._state = state
        self._followed = followed
        self._queue = queue
        self._clock = clock

    def _image_of(self, target_id: str, image: FollowedKey | None = None) -> FollowedImage:
        """The followed image the target belongs to, looked up by key (``Followed.of_target``):
        the console's forms carry the image, ``tagpin hold`` gives the target only."""
        followed = self._followed().of_target(target_id, image)
        if followed is None:
            raise LookupError(
                f"{target_id!r} is not a followed target (cluster/namespace/kind/name/container)"
            )
        return followed

    def hold(
        self, target_id: str, who: str, until: int | None = None, *, image: FollowedKey | None = None
    ) -> bool:
        """Hold the target where it is, against every digest (until ``until``, epoch ms, if
        given); False when it already was."""
        self._image_of(target_id, image)
        reason = f"held by {who}" + ("" if until is None else f" until {_utc(until)}")
        return self._state.targets.hold(
            target_id, "", self._clock(), reason=reason, trigger=Trigger.MANUAL, until=until
        )

    def release(self, target_id: str, who: str, *, image: FollowedKey | None = None) -> Released:
        followed = self._image_of(target_id, image)
        now = self._clock()
        released = self._state.targets.release(
            target_id, now, reason=f"released by {who}", trigger=Trigger.MANUAL
        )
        tag = self._state.tags.get(followed.image)
        if not released or tag is None or not tag.digest or tag.blocked:
            return Released(target_id, released, None)
        self._queue.send(
            Change(
                move=Move(
                    image=followed.image,
                    digest=Digest(tag.digest),
                    observed_at=tag.observed_at,
                    changed_at=tag.changed_at,
                    trigger=Trigger.MANUAL,
                    tag=tag.version if followed.policy is not None else None,
                ),
                reconcile_run=f"release-{now}",
            )
        )
        return Released(target_id, True, followed.image)


def _utc(at_ms: int) -> str:
    """``2026-11-24T14:00Z``: a hold's end as a person reads it."""
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")
