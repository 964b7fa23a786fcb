"""``ROLLOUT#<registry/repo:tag>`` / ``STATE``: the promotion of the tag's newest digest through the waves.

Attributes: ``digest`` and its ``observed_at``; ``wave`` (the active wave's index), ``status`` (a
promotion status), ``started_at``, ``updated_at``, ``wave_verified_at`` (when the active wave was
verified: its soak started), ``trigger``, ``correlation_id``, ``detail``; ``notice_<name>`` for
each notification sent (one per event, not per retry), claimed in the same transaction as the
image's history item of the event (``Table.transact``): a process that dies between the two leaves
both or neither, so the redelivered step that finds the notice claimed finds the item too. Started
by the consumer, moved on by the verifier; every step a conditional write on ``digest`` and ``status``,
and a step with an image history item (``event``: the start, a wave verified or started, an approval
requested, decided or lapsed, the end) writes it in the same transaction (``_step``), for the same
reason: a retry finds the step taken (False) and would never write the item.

``AWAITING`` / ``<image>``: a hint per promotion that asked for approval
(``tagpin.adapters.dynamodb.hints``), so that the approvals waiting are listed without reading
every promotion.
"""

from __future__ import annotations

from tagpin.adapters.dynamodb.hints import Hints
from tagpin.adapters.dynamodb.history import DynamoHistory
from tagpin.adapters.dynamodb.table import (
    AWAITING,
    ROLLOUT,
    TEXT_LIMIT,
    Item,
    N,
    S,
    Table,
    digest_at,
    key,
    number,
    text,
)
from tagpin.adapters.dynamodb.target_items import trigger_of
from tagpin.adapters.dynamodb.transaction import put_write, update_write
from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import Digest
from tagpin.ports.state import ImageEventRecord, Promotion, PromotionStatus


def promotion(image: FollowedKey, item: Item, started: bool = False) -> Promotion:
    return Promotion(
        image=image,
        digest=digest_at(item),
        observed_at=number(item, "observed_at") or 0,
        wave=number(item, "wave") or 0,
        status=PromotionStatus(text(item, "status") or PromotionStatus.ROLLING),
        started_at=number(item, "started_at") or 0,
        updated_at=number(item, "updated_at") or 0,
        wave_verified_at=number(item, "wave_verified_at"),
        trigger=trigger_of(item),
        correlation_id=text(item, "correlation_id"),
        detail=text(item, "detail"),
        started=started,
        tag=text(item, "tag"),
        awaiting_wave=number(item, "awaiting_wave"),
        approval_expires_at=number(item, "approval_expires_at"),
        approval_asked_by=text(item, "approval_asked_by"),
        approved_waves=frozenset(int(w) for w in (item.get("approved") or {}).get("SS", [])),
    )


class DynamoPromotions:
    def __init__(self, table: Table, history: DynamoHistory) -> None:
        self._table = table
        self._history = history
        self._awaiting = Hints(table, AWAITING)

    def start(
        self,
        image: FollowedKey,
        digest: Digest,
        observed_at: int,
        now: int,
        *,
        trigger: Trigger,
        correlation_id: str | None,
        dry_run: bool,
        event: ImageEventRecord,
        tag: str | None = None,
    ) -> Promotion | None:
        """A newer digest supersedes an older one's promotion; a dry-run promotion is replaced by a
        real one when dry-run is off. The start and its history item ``event`` in one
        TransactWriteItems (one request, both or neither)."""
        status = PromotionStatus.DRY_RUN if dry_run else PromotionStatus.ROLLING
        item: Item = {
            **key(ROLLOUT + image),
            "digest": S(digest),
            "observed_at": N(observed_at),
            "wave": N(0),
            "status": S(status),
            "started_at": N(now),
            "updated_at": N(now),
            "trigger": S(trigger),
            "correlation_id": S(correlation_id or ""),
            **({"tag": S(tag)} if tag else {}),
        }
        condition = "attribute_not_exists(pk) OR (digest <> :d AND observed_at < :t)"
        values: Item = {":d": S(digest), ":t": N(observed_at)}
        names = None
        if not dry_run:
            condition += " OR (digest = :d AND #status = :dry)"
            values[":dry"] = S(PromotionStatus.DRY_RUN)
            names = {"#status": "status"}
        start = put_write(item, condition=condition, names=names, values=values)
        started = self._table.transact([start, put_write(self._history.image_record(event))])
        if started:
            return promotion(image, item, started=True)
        current = self.get(image)
        return current if current is not None and current.digest == digest else None

    def get(self, image: FollowedKey) -> Promotion | None:
        item = self._table.get(key(ROLLOUT + image))
        return None if item is None else promotion(image, item)

    def _step(
        self,
        image: FollowedKey,
        digest: Digest,
        update: str,
        condition: str,
        values: Item,
        event: ImageEventRecord | None = None,
    ) -> bool:
        """One conditional update of the promotion; with ``event``, the update and the image's
        history item of it in one TransactWriteItems (both or neither): a process that dies between
        two writes would leave the step taken, so its redelivery (which finds it taken: False)
        would never write the item."""
        item_key, condition = key(ROLLOUT + image), "digest = :d AND " + condition
        names, values = {"#status": "status"}, {":d": S(digest), **values}
        if event is not None:
            step = update_write(item_key, update, condition=condition, names=names, values=values)
            return self._table.transact([step, put_write(self._history.image_record(event))])
        updated = self._table.update(item_key, update, condition=condition, names=names, values=values)
        return updated is not None

    def wave_verified(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        now: int,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        return self._step(
            image,
            digest,
            "SET wave_verified_at = :now, updated_at = :now",
            "wave = :w AND #status = :rolling AND attribute_not_exists(wave_verified_at)",
            {":w": N(wave), ":now": N(now), ":rolling": S(PromotionStatus.ROLLING)},
            event,
        )

    def advance(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        now: int,
        to: int | None = None,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        return self._step(
            image,
            digest,
            "SET wave = :next, updated_at = :now REMOVE wave_verified_at",
            "wave = :w AND #status = :rolling AND attribute_exists(wave_verified_at)",
            {
                ":w": N(wave),
                ":next": N(wave + 1 if to is None else to),
                ":now": N(now),
                ":rolling": S(PromotionStatus.ROLLING),
            },
            event,
        )

    def end(
        self,
        image: FollowedKey,
        digest: Digest,
        status: PromotionStatus,
        now: int,
        detail: str,
        *,
        event: ImageEventRecord,
    ) -> bool:
        """The end and its history item ``event``: one transaction (``_step``)."""
        return self._step(
            image,
            digest,
            "SET #status = :s, updated_at = :now, detail = :detail",
            "#status = :rolling",
            {
                ":s": S(status),
                ":now": N(now),
                ":detail": S(detail, TEXT_LIMIT),
                ":rolling": S(PromotionStatus.ROLLING),
            },
            event,
        )

    def clear(self, image: FollowedKey, digest: Digest) -> bool:
        return self._table.delete(
            key(ROLLOUT + image),
            condition="digest = :d AND #status = :halted",
            names={"#status": "status"},
            values={":d": S(digest), ":halted": S(PromotionStatus.HALTED)},
        )

    def request_approval(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        now: int,
        expires_at: int,
        *,
        event: ImageEventRecord | None = None,
        asked_by: str | None = None,
    ) -> bool:
        self._awaiting.note(image, now)  # the hint first (tagpin.adapters.dynamodb.hints)
        values: Item = {
            ":w": N(wave),
            ":ws": S(str(wave)),
            ":now": N(now),
            ":x": N(expires_at),
            ":rolling": S(PromotionStatus.ROLLING),
        }
        update = (
            "SET awaiting_wave = :w, approval_requested_at = :now, approval_expires_at = :x, "
            "updated_at = :now"
        )
        if asked_by:
            update += ", approval_asked_by = :by"
            values[":by"] = S(asked_by, TEXT_LIMIT)
        else:
            update += " REMOVE approval_asked_by"
        return self._step(
            image,
            digest,
            update,
            "#status = :rolling AND wave = :w AND attribute_not_exists(awaiting_wave) "
            "AND NOT contains(approved, :ws)",
            values,
            event,
        )

    def decide_approval(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        approve: bool,
        now: int,
        detail: str,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        waiting = "#status = :rolling AND awaiting_wave = :w"
        values: Item = {":w": N(wave), ":now": N(now), ":rolling": S(PromotionStatus.ROLLING)}
        if approve:
            decided = self._step(
                image,
                digest,
                "SET updated_at = :now ADD approved :ws REMOVE awaiting_wave, approval_expires_at",
                waiting,
                {**values, ":ws": {"SS": [str(wave)]}},
                event,
            )
        else:
            decided = self._step(
                image,
                digest,
                "SET #status = :halted, updated_at = :now, detail = :detail "
                "REMOVE awaiting_wave, approval_expires_at",
                waiting,
                {**values, ":halted": S(PromotionStatus.HALTED), ":detail": S(detail, TEXT_LIMIT)},
                event,
            )
        return decided

    def awaiting(self, limit: int, now: int) -> list[Promotion]:
        hints = self._awaiting.read(limit)
        found = self._table.batch_get([key(ROLLOUT + h.key) for h in hints], consistent=True)
        by_image = {(text(item, "pk") or "").removeprefix(ROLLOUT): item for item in found}
        waiting = [
            p
            for h in hints
            if h.key in by_image and (p := promotion(FollowedKey(h.key), by_image[h.key])).awaiting_approval
        ]
        self._awaiting.prune(hints, {p.image for p in waiting}, now)
        return waiting

    def lapse_approval(
        self,
        image: FollowedKey,
        digest: Digest,
        wave: int,
        now: int,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        lapsed = self._step(
            image,
            digest,
            "SET #status = :halted, updated_at = :now, detail = :detail REMOVE awaiting_wave",
            "#status = :rolling AND awaiting_wave = :w AND approval_expires_at <= :now",
            {
                ":w": N(wave),
                ":now": N(now),
                ":rolling": S(PromotionStatus.ROLLING),
                ":halted": S(PromotionStatus.HALTED),
                ":detail": S("the approval request lapsed unanswered"),
            },
            event,
        )
        return lapsed

    def claim_notice(
        self,
        image: FollowedKey,
        digest: Digest,
        notice: str,
        now: int,
        *,
        event: ImageEventRecord | None = None,
    ) -> bool:
        condition = "digest = :d AND attribute_not_exists(#n)"
        names, values = {"#n": "notice_" + notice}, {":d": S(digest), ":now": N(now)}
        if event is not None:  # the claim and the image's history item: both or neither
            claim = update_write(
                key(ROLLOUT + image), "SET #n = :now", condition=condition, names=names, values=values
            )
            return self._table.transact([claim, put_write(self._history.image_record(event))])
        claimed = self._table.update(
            key(ROLLOUT + image), "SET #n = :now", condition=condition, names=names, values=values
        )
        return claimed is not None
