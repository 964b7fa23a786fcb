"""A version channel's head in its ``TAG#<registry/repo@channel>`` item: moved in version order.

The item is a followed tag's (``tags.py``: read with ``DynamoTags.get``, like any tag) with
``version`` (the head) and ``rollback_version`` / ``rollback_digest``: where a rollback of the
head's version returns the channel, the last head before it that had not failed. A move from a
head that failed (blocked, or its version marked bad) carries that head's own rollback version
forward: its targets were rolled back past it, to the version before. Writers: the webhook and the
poller (``move``: a newer version, or an observation of the head), the verifier (``roll_back``), a
person (``move(down=True)``: ``tagpin downgrade``; ``clear``: ``tagpin clear``).

Versions are ordered by the channel's policy (semver, numeric, calver, a pattern's order), which
DynamoDB cannot compare. So every move is a read, a comparison, and a write conditional on the
head that was compared with (its version and digest unchanged); when the condition fails another
writer moved the head in between: read, compare and try again (``HEAD_ATTEMPTS``, jittered
backoff). Two notifications handled at once therefore cannot move a head down: whichever writes
second compares with the first's head. A move to a new version also reads the repository's
versions marked bad, consistently, after the head: the verifier marks a version bad *before* it
rolls the head back, so a writer that chose the version before it was marked (a poll in flight)
either sees the mark, or finds the head it compared with gone and compares again. The verifier
blocks the failed head (``DynamoTags.mark_bad``) before it marks the version, and a move to
another digest is conditional on the head being as blocked as it was read: a writer that read the
head before it failed compares again and carries the rollback version forward.

Whether a version is marked bad is asked one way everywhere: ``VersionSet`` (any spelling the
policy reads as the same version: ``v1.4.2`` is ``1.4.2``).
"""

from __future__ import annotations

import random
import time

from tagpin.adapters.dynamodb.digests import tombstone
from tagpin.adapters.dynamodb.table import TAG, Item, N, S, Table, key
from tagpin.adapters.dynamodb.tags import tag_state
from tagpin.adapters.dynamodb.versions import marked_tags
from tagpin.domain.channels import ChannelKey, FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import TagOutcome
from tagpin.domain.refs import Digest
from tagpin.domain.versions import Step, VersionPolicy, VersionSet, move
from tagpin.ports.state import TagRecord, TagState

HEAD_ATTEMPTS = 10
BACKOFF_BASE_S = 0.005
BACKOFF_CAP_S = 0.2


class HeadContended(RuntimeError):
    """Other writers kept moving the head between this writer's read and its write."""


def _unchanged_head(current: TagState) -> tuple[str, Item]:
    """The condition that the stored head is still ``current`` (what was compared with)."""
    if current.version is None:
        return "digest = :cd AND attribute_not_exists(version)", {":cd": S(current.digest)}
    return "digest = :cd AND version = :cv", {":cd": S(current.digest), ":cv": S(current.version)}


def _as_read(current: TagState) -> tuple[str, Item]:
    """The condition that the stored head is still ``current`` as a move from it decides where a
    rollback returns to: the same version and digest, as blocked as it was, the same rollback."""
    condition, values = _unchanged_head(current)
    if current.blocked:
        condition += " AND bad_digest = digest"
    else:
        condition += " AND (attribute_not_exists(bad_digest) OR bad_digest <> digest)"
    if current.rollback_digest is None or current.rollback_version is None:
        return f"{condition} AND attribute_not_exists(rollback_digest)", values
    condition += " AND rollback_digest = :ord AND rollback_version = :orv"
    return condition, values | {":ord": S(current.rollback_digest), ":orv": S(current.rollback_version)}


def rollback_after(current: TagState, marked: VersionSet) -> tuple[str, str] | None:
    """Where a rollback returns to once the head moves on from ``current``: ``current`` itself,
    unless it failed (blocked, or its version marked bad): then where a rollback of it would have
    returned (its targets were rolled back past it). None: nowhere."""
    if current.blocked or current.version is None or current.version in marked:
        if current.rollback_version is None or current.rollback_digest is None:
            return None
        return current.rollback_version, current.rollback_digest
    return current.version, current.digest


class DynamoHeads:
    def __init__(self, table: Table) -> None:
        self._table = table

    def _get(self, image: FollowedKey) -> TagState | None:
        item = self._table.get(key(TAG + image))
        return None if item is None else tag_state(image, item)

    def _marked(self, image: FollowedKey, policy: VersionPolicy) -> VersionSet:
        """The versions of the channel's repository marked bad: read consistently, after the head."""
        channel = ChannelKey.parse(image)
        return VersionSet(
            policy, () if channel is None else marked_tags(self._table, str(channel.repository))
        )

    def move(
        self,
        image: FollowedKey,
        digest: Digest,
        observed_at: int,
        trigger: Trigger,
        version: str,
        policy: VersionPolicy,
        *,
        down: bool = False,
    ) -> TagRecord:
        if policy.version(version) is None:
            raise ValueError(f"{version!r} is not a version of {policy.text}")
        for attempt in range(HEAD_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt)))  # noqa: S311
            current = self._get(image)
            if current is None or not current.digest:  # the first head (record_error may have made the item)
                if self._first(image, digest, observed_at, trigger, version):
                    state = TagState(image, digest, observed_at, observed_at, observed_at, version=version)
                    return TagRecord(TagOutcome.CHANGED, state, None)
                continue
            step = Step.UPGRADE if current.version is None else move(policy, current.version, version)
            if step is Step.SAME:
                done = self._observed(current, digest, observed_at, trigger)
            elif down:  # a person's downgrade: nothing to return to
                done = self._moved(current, digest, observed_at, trigger, version, rollback=None)
            elif step is Step.DOWNGRADE:
                return TagRecord(TagOutcome.STALE, current, current.digest)
            else:  # UPGRADE, or UNKNOWN (the head is no version of the policy as it reads now)
                marked = self._marked(image, policy)  # read after the head: see the module's text
                if version in marked:
                    return TagRecord(TagOutcome.STALE, current, current.digest)
                rollback = rollback_after(current, marked)
                done = self._moved(current, digest, observed_at, trigger, version, rollback=rollback)
            if done is not None:
                return done
        raise HeadContended(
            f"{image}: the head kept moving under {HEAD_ATTEMPTS} attempts to record {version}"
        )

    def _first(
        self, image: FollowedKey, digest: Digest, observed_at: int, trigger: Trigger, version: str
    ) -> bool:
        t = N(observed_at)
        written = self._table.update(
            key(TAG + image),
            "SET digest = :d, version = :v, observed_at = :t, changed_at = :t, resolved_at = :t, "
            "#trigger = :tr REMOVE last_error, error_at",
            condition="attribute_not_exists(digest)",
            names={"#trigger": "trigger"},
            values={":d": S(digest), ":v": S(version), ":t": t, ":tr": S(trigger)},
        )
        if written is None:
            return False
        tombstone(self._table, image, observed_at)
        return True

    def _observed(
        self, current: TagState, digest: Digest, observed_at: int, trigger: Trigger
    ) -> TagRecord | None:
        """The head's own version again: the newest observation wins (the tag may have been pushed
        again with other bytes). None: the head moved meanwhile.

        Observations are ordered by tagpin's clock: a re-push observed by a writer whose clock is
        behind the stored observation is STALE here, and recorded by the next check (a poll)."""
        if current.observed_at >= observed_at:  # a newer observation is stored
            outcome = TagOutcome.UNCHANGED if current.digest == digest else TagOutcome.STALE
            return TagRecord(outcome, current, current.digest)
        condition, values = _unchanged_head(current)
        values |= {":t": N(observed_at)}
        if current.digest == digest:
            new = self._table.update(
                key(TAG + current.image),
                "SET observed_at = :t, resolved_at = :t REMOVE last_error, error_at",
                condition=f"{condition} AND observed_at < :t",
                values=values,
                returns="ALL_NEW",
            )
            return (
                None
                if new is None
                else TagRecord(TagOutcome.UNCHANGED, tag_state(current.image, new), digest)
            )
        # The same version under another digest: the rollback version stays the one before.
        written = self._table.update(
            key(TAG + current.image),
            "SET digest = :d, observed_at = :t, changed_at = :t, resolved_at = :t, #trigger = :tr "
            "REMOVE last_error, error_at, bad_digest, bad_reason, bad_at",
            condition=f"{condition} AND observed_at < :t",
            names={"#trigger": "trigger"},
            values={**values, ":d": S(digest), ":tr": S(trigger)},
            returns="ALL_NEW",
        )
        if written is None:
            return None
        tombstone(self._table, current.image, observed_at)
        return TagRecord(TagOutcome.CHANGED, tag_state(current.image, written), current.digest)

    def _moved(
        self,
        current: TagState,
        digest: Digest,
        observed_at: int,
        trigger: Trigger,
        version: str,
        *,
        rollback: tuple[str, str] | None,
    ) -> TagRecord | None:
        """Another version: the head moves to it (and, to another digest, ``rollback`` is where a
        rollback of it returns to). Its observation counts as newer than every one stored (a slow
        writer's clock must not make the newer version's change older than the head it replaces:
        the targets' claims and the promotions order by it). None: the head moved meanwhile."""
        at = max(observed_at, current.observed_at + 1)
        condition, values = _unchanged_head(current)
        values |= {":v": S(version), ":t": N(at), ":r": N(observed_at)}
        if current.digest == digest:  # the same bytes under a newer version: the version moves only
            new = self._table.update(
                key(TAG + current.image),
                "SET version = :v, observed_at = :t, resolved_at = :r REMOVE last_error, error_at",
                condition=condition,
                values=values,
                returns="ALL_NEW",
            )
            return (
                None
                if new is None
                else TagRecord(TagOutcome.UNCHANGED, tag_state(current.image, new), digest)
            )
        condition, values = _as_read(current)
        values |= {":v": S(version), ":t": N(at), ":r": N(observed_at), ":d": S(digest), ":tr": S(trigger)}
        update = (
            "SET digest = :d, version = :v, observed_at = :t, changed_at = :t, resolved_at = :r, "
            "#trigger = :tr"
        )
        removed = "last_error, error_at, bad_digest, bad_reason, bad_at"
        if rollback is None:
            removed += ", rollback_version, rollback_digest"
        else:
            update += ", rollback_version = :rv, rollback_digest = :rd"
            values |= {":rv": S(rollback[0]), ":rd": S(rollback[1])}
        written = self._table.update(
            key(TAG + current.image),
            f"{update} REMOVE {removed}",
            condition=condition,
            names={"#trigger": "trigger"},
            values=values,
            returns="ALL_NEW",
        )
        if written is None:
            return None
        tombstone(self._table, current.image, at)
        return TagRecord(TagOutcome.CHANGED, tag_state(current.image, written), current.digest)

    def roll_back(
        self, image: FollowedKey, digest: Digest, now: int, policy: VersionPolicy
    ) -> TagState | None:
        for _attempt in range(HEAD_ATTEMPTS):
            current = self._get(image)
            if (
                current is None
                or current.digest != digest
                or not current.rollback_digest
                or not current.rollback_version
                or current.rollback_version in self._marked(image, policy)  # a person held it back
            ):
                return None
            at = max(now, current.observed_at + 1)
            condition, values = _unchanged_head(current)
            new = self._table.update(
                key(TAG + image),
                "SET digest = :rd, version = :rv, observed_at = :t, changed_at = :t, #trigger = :tr "
                "REMOVE rollback_version, rollback_digest, bad_digest, bad_reason, bad_at",
                condition=f"{condition} AND rollback_digest = :rd AND rollback_version = :rv",
                names={"#trigger": "trigger"},
                values={
                    **values,
                    ":rd": S(current.rollback_digest),
                    ":rv": S(current.rollback_version),
                    ":t": N(at),
                    ":tr": S(Trigger.ROLLBACK),
                },
                returns="ALL_NEW",
            )
            if new is not None:
                tombstone(self._table, image, at)
                return tag_state(image, new)
        raise HeadContended(f"{image}: the head kept moving while it was rolled back")

    def clear(self, image: FollowedKey, version: str, policy: VersionPolicy) -> bool:
        current = self._get(image)
        if current is None or not current.blocked or current.version not in VersionSet(policy, [version]):
            return False
        condition, values = _unchanged_head(current)
        return (
            self._table.update(
                key(TAG + image),
                "REMOVE bad_digest, bad_reason, bad_at",
                condition=f"{condition} AND bad_digest = digest",
                values=values,
            )
            is not None
        )
