"""``HIST#`` items: the audit trails, expiring after ``rollout.history_retention_days`` (TTL on
``expires_at``, epoch seconds).

- ``TARGET#<target id>`` / ``HIST#<epoch ms>#<digest prefix>#<status>``: each outcome of a target
  (``status``: a target status or note; ``removed`` when the reconciler stops following it),
  written by the consumer, the verifier and the reconciler.
- ``IMAGE#<registry/repo:tag>`` / ``HIST#<epoch ms>#<digest prefix>#<event>``: each step of an
  image's promotion (``event``), written by the consumer and the verifier.

Read by the CLI (``tagpin history``), newest first.
"""

from __future__ import annotations

from collections.abc import Mapping

from tagpin.adapters.dynamodb.table import (
    HISTORY,
    IMAGE,
    TARGET,
    Item,
    N,
    S,
    Table,
    digest_if,
    digest_prefix,
    key,
    number,
    text,
)
from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import OptionalDigest
from tagpin.ports.state import HistoryEntry, ImageEvent, ImageEventRecord

DETAIL_LIMIT = 4000


def history_key(pk: str, now: int, *parts: str) -> dict[str, dict[str, str]]:
    return key(pk, f"{HISTORY}{now:013d}#" + "#".join(parts))


def entry(item: Item) -> HistoryEntry:
    return HistoryEntry(
        at=number(item, "at") or 0,
        digest=digest_if(item, "digest"),
        status=text(item, "status"),
        event=text(item, "event"),
        trigger=text(item, "trigger"),
        detail=text(item, "detail"),
        previous_image=text(item, "previous_image"),
        correlation_id=text(item, "correlation_id"),
        wave=text(item, "wave"),
    )


class DynamoHistory:
    def __init__(self, table: Table) -> None:
        self._table = table

    def target_item(
        self,
        target_id: str,
        now: int,
        sk_parts: tuple[str, ...],
        fields: Mapping[str, str | None],
        limit: int,
    ) -> None:
        """One item of a target's trail; empty fields are left out."""
        self._table.put(self.target_record(target_id, now, sk_parts, fields, limit))

    def target_record(
        self,
        target_id: str,
        now: int,
        sk_parts: tuple[str, ...],
        fields: Mapping[str, str | None],
        limit: int,
    ) -> Item:
        """The item ``target_item`` puts, for a write that puts it with the target's state in one
        transaction (``tagpin.adapters.dynamodb.targets``)."""
        item: Item = {
            **history_key(TARGET + target_id, now, *sk_parts),
            "at": N(now),
            "expires_at": self._table.expires_at(now),
        }
        for name, value in fields.items():
            if value:
                item[name] = S(value, limit)
        return item

    def image_event(
        self,
        image: FollowedKey,
        digest: OptionalDigest,
        event: ImageEvent,
        now: int,
        *,
        detail: str = "",
        wave: str | None = None,
        trigger: Trigger | None = None,
        correlation_id: str | None = None,
    ) -> None:
        self.record(
            ImageEventRecord(
                image,
                digest,
                event,
                now,
                detail=detail,
                wave=wave,
                trigger=trigger,
                correlation_id=correlation_id,
            )
        )

    def record(self, recorded: ImageEventRecord) -> None:
        self._table.put(self.image_record(recorded))

    def image_record(self, recorded: ImageEventRecord) -> Item:
        """The item ``image_event`` puts, for a write that puts it with a promotion's notice in one
        transaction (``tagpin.adapters.dynamodb.promotions``)."""
        item: Item = {
            **history_key(
                IMAGE + recorded.image, recorded.at, digest_prefix(recorded.digest), recorded.event.value
            ),
            "digest": S(recorded.digest),
            "event": S(recorded.event.value),
            "at": N(recorded.at),
            "expires_at": self._table.expires_at(recorded.at),
        }
        for name, value in (
            ("detail", recorded.detail),
            ("wave", recorded.wave),
            ("trigger", recorded.trigger),
            ("correlation_id", recorded.correlation_id),
        ):
            if value:
                item[name] = S(value, DETAIL_LIMIT)
        return item

    def of_image(self, image: FollowedKey, limit: int = 100) -> list[HistoryEntry]:
        return [
            entry(i) for i in self._table.query(IMAGE + image, prefix=HISTORY, newest_first=True, limit=limit)
        ]

    def of_target(self, target_id: str, limit: int = 50) -> list[HistoryEntry]:
        return [
            entry(i)
            for i in self._table.query(TARGET + target_id, prefix=HISTORY, newest_first=True, limit=limit)
        ]
