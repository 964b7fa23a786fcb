"""``TAG#<registry/repo:tag>`` / ``STATE``: the digest each followed tag points to (a version
channel's, ``TAG#<registry/repo@channel>``: the digest of its head, ``version``).

Attributes: ``digest``; ``observed_at`` (the newest observation, epoch ms, tagpin's clock),
``changed_at`` (when the tag moved to ``digest``), ``resolved_at`` (when the registry last
answered); ``last_error`` / ``error_at`` while it cannot be resolved; ``bad_digest``,
``bad_reason``, ``bad_at`` when a rollout of the digest failed (cleared when the tag moves).
Written by the poller, the webhook and the reconciler (``record``), the verifier (``mark_bad``).
A version channel's head (``version``, ``rollback_version``, ``rollback_digest``) moves in version
order, not observation order: ``heads.py``. A move leaves a tombstone in the tag's entry in
``DIGESTS#`` (``digests.py``), the cache steady runs read.
"""

from __future__ import annotations

from tagpin.adapters.dynamodb.digests import tombstone
from tagpin.adapters.dynamodb.table import (
    TAG,
    TEXT_LIMIT,
    Item,
    N,
    S,
    Table,
    digest_at,
    digest_if,
    key,
    number,
    text,
)
from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import TagOutcome
from tagpin.domain.refs import Digest
from tagpin.ports.state import TagRecord, TagState

RECORD_ATTEMPTS = 3


# What a console row of a target shows of its tag (``Tags.shown``): its digest and version.
SHOWN_ATTRIBUTES = ["pk", "digest", "version"]


def tag_state(image: FollowedKey, item: Item) -> TagState:
    return TagState(
        image=image,
        digest=digest_at(item),
        observed_at=number(item, "observed_at") or 0,
        changed_at=number(item, "changed_at") or 0,
        resolved_at=number(item, "resolved_at") or 0,
        last_error=text(item, "last_error"),
        error_at=number(item, "error_at"),
        bad_digest=digest_if(item, "bad_digest"),
        bad_reason=text(item, "bad_reason"),
        version=text(item, "version"),
        rollback_version=text(item, "rollback_version"),
        rollback_digest=digest_if(item, "rollback_digest"),
    )


class DynamoTags:
    def __init__(self, table: Table) -> None:
        self._table = table

    def record(
        self, image: FollowedKey, digest: Digest, observed_at: int, trigger: Trigger, *, moved: bool = False
    ) -> TagRecord:
        item_key = key(TAG + image)
        d, t = S(digest), N(observed_at)
        for attempt in range(RECORD_ATTEMPTS):
            # The common case first (a tag that did not move): only move the "last resolved" mark
            # forward, one write. A moved tag costs a failed conditional write, then the change;
            # unless the caller read it moved (``moved``): then the change is tried first.
            if not (moved and attempt == 0):
                new = self._table.update(
                    item_key,
                    "SET observed_at = :t, resolved_at = :t REMOVE last_error, error_at",
                    condition="digest = :d AND observed_at < :t",
                    values={":d": d, ":t": t},
                    returns="ALL_NEW",
                )
                if new is not None:
                    return TagRecord(TagOutcome.UNCHANGED, tag_state(image, new), digest)
            old = self._table.update(
                item_key,
                "SET digest = :d, observed_at = :t, changed_at = :t, resolved_at = :t, #trigger = :tr "
                "REMOVE last_error, error_at, bad_digest, bad_reason, bad_at",
                # attribute_not_exists(digest), not (pk): record_error may have created the item (the
                # first resolution failed) and a first sighting must still count as CHANGED.
                condition="attribute_not_exists(digest) OR (observed_at < :t AND digest <> :d)",
                names={"#trigger": "trigger"},
                values={":d": d, ":t": t, ":tr": S(trigger)},
                returns="ALL_OLD",
            )
            if old is not None:
                # the settled-digest cache: this move's tombstone (see digests.py)
                tombstone(self._table, image, observed_at)
                state = TagState(image, digest, observed_at, observed_at, observed_at)
                return TagRecord(TagOutcome.CHANGED, state, digest_if(old, "digest"))
            if moved and attempt == 0:
                continue  # not moved after all (another writer was first): the common case's write
            current = self.get(image)
            if current is None:  # deleted between the writes: vanishingly rare; treat as stale
                return TagRecord(
                    TagOutcome.STALE, TagState(image, digest, observed_at, observed_at, observed_at), None
                )
            if current.digest != digest or current.observed_at >= observed_at:
                result = TagOutcome.UNCHANGED if current.digest == digest else TagOutcome.STALE
                return TagRecord(result, current, current.digest)
            # Another writer moved the tag to this digest between our two writes, with an older
            # observation: try again, so the newest observation still wins the "last seen" mark.
        current = self.get(image)
        assert current is not None
        return TagRecord(
            TagOutcome.UNCHANGED if current.digest == digest else TagOutcome.STALE, current, current.digest
        )

    def record_error(self, image: FollowedKey, error: str, at: int) -> None:
        self._table.update(
            key(TAG + image),
            "SET last_error = :e, error_at = :t",
            values={":e": S(error, TEXT_LIMIT), ":t": N(at)},
        )

    def get(self, image: FollowedKey) -> TagState | None:
        item = self._table.get(key(TAG + image))
        return None if item is None else tag_state(image, item)

    def get_many(self, images: list[FollowedKey]) -> dict[FollowedKey, TagState]:
        return self._many(images)

    def shown(self, images: list[FollowedKey]) -> dict[FollowedKey, TagState]:
        return self._many(images, SHOWN_ATTRIBUTES)

    def _many(
        self, images: list[FollowedKey], attributes: list[str] | None = None
    ) -> dict[FollowedKey, TagState]:
        found: dict[FollowedKey, TagState] = {}
        keys = [key(TAG + image) for image in dict.fromkeys(images)]
        for item in self._table.batch_get(keys, consistent=False, attributes=attributes):
            image = FollowedKey((text(item, "pk") or "").removeprefix(TAG))
            found[image] = tag_state(image, item)
        return found

    def mark_bad(self, image: FollowedKey, digest: Digest, reason: str, now: int) -> bool:
        return (
            self._table.update(
                key(TAG + image),
                "SET bad_digest = :d, bad_reason = :r, bad_at = :now",
                condition="digest = :d",
                values={":d": S(digest), ":r": S(reason, TEXT_LIMIT), ":now": N(now)},
            )
            is not None
        )
