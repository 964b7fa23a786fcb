"""``HIST#`` items: the audit trails, expiring after ``rollout.history_retention_days`` (TTL on
``expires_at``, epoch seconds).

- ``TARGET#<target id>`` / ``HIST#<epoch ms>#<digest prefix>#<status>#<said>``: each outcome of a
  target (``status``: a target status or note; ``removed`` when the reconciler stops following it),
  written by the consumer, the verifier and the reconciler.
- ``IMAGE#<registry/repo:tag>`` / ``HIST#<epoch ms>#<digest prefix>#<event>#<said>``: each step of
  an image's promotion (``event``), written by the consumer and the verifier.

``<said>`` (``said``): a hash of what the item says; items stored before it was added end at the
status or event, and read as the others (by ``begins_with(sk, "HIST#")``, their time from ``at``).

Read by the CLI (``tagpin history``) and the console, newest first.
"""

from __future__ import annotations

import hashlib
import json
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


SAID_BYTES = 6  # 12 hex characters: a sort key of under 80 bytes, of the 1,024 DynamoDB allows


def said(attributes: Item) -> str:
    """A hash of what a history item says (its attributes but its key and its expiry, which follows
    from ``at`` and the retention setting), the last part of its sort key.

    Without it, two items of one trail with the same time, digest and status or event had one key,
    and the second PutItem replaced the first: a round decides all its targets at one ``now``, so
    the image's trail kept one target's ``unverified`` or ``deferred`` of several. Why a hash of the
    item, not a random suffix nor a conditional put retried with a suffix: it costs no request (a
    conditional put would, on a collision, and most of these items are put in a transaction with the
    state they record, whose failed condition ``Table.transact`` answers as the state's); the same
    item written again (botocore's retry of a request that did land, a message delivered again at
    the same ``now``) still replaces itself instead of being shown twice; and the key still starts
    with the time, so the trails' order (by sort key, newest first) is unchanged, items of one
    millisecond in the same order on every read. Two items that say the same in every attribute in
    one millisecond stay one item: nothing a reader could tell apart is lost."""
    canonical = json.dumps(attributes, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(canonical.encode(), digest_size=SAID_BYTES).hexdigest()


def history_key(pk: str, now: int, parts: tuple[str, ...], attributes: Item) -> dict[str, dict[str, str]]:
    """The key of a history item of ``pk`` at ``now`` that says ``attributes``."""
    return key(pk, f"{HISTORY}{now:013d}#" + "#".join((*parts, said(attributes))))


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
        attributes: Item = {"at": N(now)}
        for name, value in fields.items():
            if value:
                attributes[name] = S(value, limit)
        return {
            **history_key(TARGET + target_id, now, sk_parts, attributes),
            **attributes,
            "expires_at": self._table.expires_at(now),
        }

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
        attributes: Item = {
            "digest": S(recorded.digest),
            "event": S(recorded.event.value),
            "at": N(recorded.at),
        }
        for name, value in (
            ("detail", recorded.detail),
            ("wave", recorded.wave),
            ("trigger", recorded.trigger),
            ("correlation_id", recorded.correlation_id),
        ):
            if value:
                attributes[name] = S(value, DETAIL_LIMIT)
        parts = (digest_prefix(recorded.digest), recorded.event.value)
        return {
            **history_key(IMAGE + recorded.image, recorded.at, parts, attributes),
            **attributes,
            "expires_at": self._table.expires_at(recorded.at),
        }

    def of_image(self, image: FollowedKey, limit: int = 100) -> list[HistoryEntry]:
        return [
            entry(i) for i in self._table.query(IMAGE + image, prefix=HISTORY, newest_first=True, limit=limit)
        ]

    def of_target(self, target_id: str, limit: int = 50) -> list[HistoryEntry]:
        return [
            entry(i)
            for i in self._table.query(TARGET + target_id, prefix=HISTORY, newest_first=True, limit=limit)
        ]
