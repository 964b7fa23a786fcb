"""An image's audit trail and its notifications: each rollout event recorded, and announced, once.

At-least-once delivery means every step of a rollout may run more than once (an SQS retry, a
duplicate verification, two consumers). ``once`` names the event in the promotion's item; only
the invocation that claims it first records the history item and sends the notification.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest
from tagpin.ports.notify import Notifier, RolloutEvent, RolloutEventKind
from tagpin.ports.state import ImageEvent, ImageEventRecord, Promotion, State


def move_of(promotion: Promotion) -> Move:
    """The move a promotion is of: its changed_at is its observation, which identifies the move (a
    later promotion of the same digest, the tag come back to it, is a new move)."""
    return Move(
        image=promotion.image,
        digest=Digest(promotion.digest),
        observed_at=promotion.observed_at,
        trigger=promotion.trigger or Trigger.PROMOTE,
        changed_at=promotion.observed_at,
        correlation_id=promotion.correlation_id,
        tag=promotion.tag,
    )


class Audit:
    def __init__(self, state: State, notifier: Notifier | None) -> None:
        self._state = state
        self._notifier = notifier

    def record(
        self,
        move: Move,
        event: ImageEvent,
        now: int,
        *,
        once: str | None = None,
        detail: str = "",
        wave: str | None = None,
        announce: RolloutEventKind | None = None,
        targets: Sequence[str] = (),
        message: str = "",
        complete: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> bool:
        """Record ``event`` of ``move`` (its image, digest, trigger and correlation id) in the image's
        history and, with ``announce``, notify (``targets`` and ``message`` are the notification's).
        With ``once``, only the first caller for (the promotion of the digest, ``once``) does
        either: False for the others. The claim of ``once`` and the history item are one write
        (``Promotions.claim_notice``): a process that dies between them cannot leave the notice
        claimed and the item lost. The notification is sent after it: a process that dies after
        the write and before the send loses the announcement (a hint), never the record."""
        recorded = self.item(move, event, now, detail=detail, wave=wave)
        if once is None:
            self._state.history.record(recorded)
        elif not self._state.promotions.claim_notice(move.image, move.digest, once, now, event=recorded):
            return False
        if announce is not None:
            self.announce(
                move,
                announce,
                now,
                wave=wave,
                targets=targets,
                message=message,
                complete=complete,
                extra=extra,
            )
        return True

    @staticmethod
    def item(
        move: Move, event: ImageEvent, now: int, *, detail: str = "", wave: str | None = None
    ) -> ImageEventRecord:
        """The image's history item of ``event`` of ``move`` (its image, digest, trigger and
        correlation id), for a state write that puts it with the state it records (one
        transaction: ``Promotions.end``, ``Targets.hold``...), then ``announce``."""
        return ImageEventRecord(
            move.image,
            move.digest,
            event,
            now,
            detail=detail,
            wave=wave,
            trigger=move.trigger,
            correlation_id=move.correlation_id,
        )

    def announce(
        self,
        move: Move,
        kind: RolloutEventKind,
        now: int,
        *,
        wave: str | None = None,
        targets: Sequence[str] = (),
        message: str = "",
        complete: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Notify ``kind`` of ``move``, and nothing else: for an event whose history item was written
        with the state it records (``Targets.hold(event=...)``), whose conditional write made it once."""
        if self._notifier is not None:
            self._notifier.send(
                RolloutEvent(
                    event=kind,
                    image=move.image,
                    digest=move.digest,
                    wave=wave or "",
                    targets=list(targets),
                    at=now,
                    detail=message,
                    trigger=move.trigger,
                    correlation_id=move.correlation_id,
                    complete=complete,
                    extra=dict(extra or {}),
                )
            )
