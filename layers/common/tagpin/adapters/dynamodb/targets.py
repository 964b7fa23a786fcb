"""``TARGET#<cluster/namespace/kind/name/container>`` / ``STATE``: what each target runs or is moving to.

Attributes: ``image``, ``digest`` and its ``observed_at``; ``status`` (a target status),
``updated_at``, ``trigger``, ``detail``, ``previous_image`` (what tagpin replaced, for a rollback).
Claimed and finished by the consumer, moved on by the verifier, marked removed by the reconciler;
read by every function's level check. Each outcome also lands in the target's history, in the same
transaction as the state it records (``Table.transact``): a process that dies between the two (a
Lambda timeout, a crash) leaves both or neither, so a redelivered message that finds the outcome
already decided finds its history item too. A transaction bills each item twice: an outcome costs 4
WRU where the two writes cost 2 (items under 1 KB). An outcome whose state is not written (not held,
without ``expected``: a SUPERSEDED note; a removal of a target never stored) is its history item alone.
An outcome or a hold may carry an image history item too (``event``: the commit that moved it, a
hold of a person's change), put in the same transaction, as a promotion's start and end put theirs.

``HOLDS`` / ``<target id>``: a hint per target put on hold (``tagpin.adapters.dynamodb.hints``),
so that listing the holds reads the holds, not every target.
"""

from __future__ import annotations

from collections.abc import Mapping

from tagpin.adapters.dynamodb.hints import Hints
from tagpin.adapters.dynamodb.history import DynamoHistory
from tagpin.adapters.dynamodb.table import (
    HOLDS,
    TAG,
    TARGET,
    TEXT_LIMIT,
    Item,
    N,
    S,
    Table,
    digest_prefix,
    key,
    text,
)
from tagpin.adapters.dynamodb.tags import tag_state
from tagpin.adapters.dynamodb.target_items import NO_CLAIMS, SHOWN_ATTRIBUTES, target_state
from tagpin.adapters.dynamodb.transaction import put_write, update_write
from tagpin.domain.channels import FollowedKey
from tagpin.domain.messages import Trigger
from tagpin.domain.refs import Digest, OptionalDigest
from tagpin.ports.state import ENDS_MOVES, ImageEventRecord, TagState, TargetNote, TargetState, TargetStatus


class DynamoTargets:
    def __init__(self, table: Table, history: DynamoHistory) -> None:
        self._table = table
        self._history = history
        self._holds = Hints(table, HOLDS)

    def get(self, target_id: str) -> TargetState | None:
        return self.get_many([target_id]).get(target_id)

    def get_many(self, target_ids: list[str]) -> dict[str, TargetState]:
        return self._many(target_ids)

    def shown(self, target_ids: list[str]) -> dict[str, TargetState]:
        return self._many(target_ids, SHOWN_ATTRIBUTES)

    def _many(self, target_ids: list[str], attributes: list[str] | None = None) -> dict[str, TargetState]:
        keys = [key(TARGET + t) for t in dict.fromkeys(target_ids)]
        items = self._table.batch_get(keys, consistent=True, attributes=attributes)
        states = (target_state(item) for item in items)
        return {state.target_id: state for state in states}

    def get_with_tag(
        self, image: FollowedKey, target_ids: list[str]
    ) -> tuple[TagState | None, dict[str, TargetState]]:
        """One BatchGetItem of ``TAG#<image>`` and the targets' items (strongly consistent, as the
        targets' alone are: the tag's item is read as its own GetItem read it)."""
        keys = [key(TAG + image), *(key(TARGET + t) for t in dict.fromkeys(target_ids))]
        tag: TagState | None = None
        states: dict[str, TargetState] = {}
        for item in self._table.batch_get(keys, consistent=True):
            if (text(item, "pk") or "").startswith(TAG):
                tag = tag_state(image, item)
            else:
                state = target_state(item)
                states[state.target_id] = state
        return tag, states

    def claim(
        self,
        target_id: str,
        image: FollowedKey,
        digest: Digest,
        observed_at: int,
        trigger: Trigger,
        now: int,
        detail: str | None = None,
    ) -> bool:
        """Equal ``observed_at`` with the same digest is allowed, so a retried message re-claims; so
        is an older observation of the digest the target already holds (a wave promoted later, a
        deferred rollout started later), which leaves the newer ``observed_at`` in place. A target
        on a live hold against ``digest`` is never claimed (False)."""
        values: Item = {":d": S(digest), ":p": S(TargetStatus.PENDING), ":now": N(now), ":tr": S(trigger)}
        # Never over a live hold against this digest (a person's, against any digest: ""): a hold
        # written after the caller read the target's state wins, and nothing is claimed or patched.
        not_held = (
            " AND NOT (#status = :held AND (held_digest = :any OR held_digest = :d)"
            " AND (attribute_not_exists(held_until) OR held_until > :now))"
        )
        values |= {":held": S(TargetStatus.HELD), ":any": S("")}
        # The claims of the moves in flight (tagpin.usecases.interrupted): each adds its time; an
        # outcome, a hold or a removal ends them (REMOVE). A deferral's claim patches nothing: not
        # added (the reconciler's healing change defers again every run while a window is closed).
        tail = " REMOVE detail ADD claims :c"
        values[":c"] = {"NS": [str(now)]}
        if detail is not None:
            values[":detail"] = S(detail, TEXT_LIMIT)
            tail = ", detail = :detail"
            del values[":c"]
        names = {"#status": "status", "#trigger": "trigger"}
        item_key = key(TARGET + target_id)
        newer = self._table.update(
            item_key,
            "SET image = :i, digest = :d, observed_at = :t, #status = :p, updated_at = :now, #trigger = :tr "
            + tail,
            # no observed_at: only a hold was ever written (a person held it before tagpin applied
            # anything there); once released or lapsed, the first move claims it
            condition="(attribute_not_exists(pk) OR attribute_not_exists(observed_at) OR observed_at < :t"
            " OR (observed_at = :t AND digest = :d))" + not_held,
            names=names,
            values={**values, ":i": S(image), ":t": N(observed_at)},
        )
        if newer is not None:
            return True
        same = self._table.update(
            item_key,
            "SET #status = :p, updated_at = :now, #trigger = :tr " + tail,
            condition="digest = :d" + not_held,
            names=names,
            values=values,
        )
        return same is not None

    def finish(
        self,
        target_id: str,
        digest: Digest,
        status: TargetStatus,
        now: int,
        *,
        trigger: Trigger,
        detail: str | None = None,
        previous_image: str | None = None,
        correlation_id: str | None = None,
        expected: frozenset[TargetStatus] | None = None,
        extra: Mapping[str, str] | None = None,
        event: ImageEventRecord | None = None,
    ) -> bool:
        values: Item = {":d": S(digest), ":s": S(status), ":now": N(now)}
        condition = "digest = :d"
        if expected:
            options = []
            for i, allowed in enumerate(sorted(expected)):
                values[f":e{i}"] = S(allowed)
                options.append(f":e{i}")
            condition += f" AND #status IN ({', '.join(options)})"
        else:  # never over a hold: a person's decision ends only by its own release (or its end)
            condition += " AND (attribute_not_exists(#status) OR #status <> :held)"
            values[":held"] = S(TargetStatus.HELD)
        sets = ["#status = :s", "updated_at = :now"]
        if detail is not None:
            sets.append("detail = :detail")
            values[":detail"] = S(detail, TEXT_LIMIT)
        if previous_image is not None:
            sets.append("previous_image = :prev")
            values[":prev"] = S(previous_image)
        if status is TargetStatus.HELD:  # a workload's hold annotation: listed as every hold
            self._holds.note(target_id, now)
        # The commit that wrote this outcome (the write-back's), kept on the state: a pin request
        # delivered again sends its verification again with it (tagpin.usecases.gitverify).
        commit = (extra or {}).get("commit")
        if commit:
            sets.append("applied_commit = :commit")
            values[":commit"] = S(commit)
        removes = [] if commit else ["applied_commit"]
        if status in ENDS_MOVES:  # what the target runs is recorded: no move in flight any more
            removes.append("claims")
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")

        def record(recorded: str) -> Item:
            fields = {
                "digest": digest,
                "status": recorded,
                "trigger": trigger,
                "detail": detail,
                "previous_image": previous_image,
                "correlation_id": correlation_id,
                **(extra or {}),
            }
            return self._history.target_record(
                target_id, now, (digest_prefix(digest), status.value), fields, TEXT_LIMIT
            )

        state = update_write(
            key(TARGET + target_id),
            update,
            condition=condition,
            names={"#status": "status"},
            values=values,
        )
        if self._table.transact([state, put_write(record(status.value)), *self._image_item(event)]):
            return True
        if not expected:  # not held: the outcome is noted as superseded (no state written with it)
            self._table.put(record(TargetNote.SUPERSEDED.value))
        return False

    def hold(
        self,
        target_id: str,
        digest: OptionalDigest,
        now: int,
        *,
        reason: str,
        trigger: Trigger,
        until: int | None = None,
        if_still: TargetState | None = None,
        event: ImageEventRecord | None = None,
    ) -> bool:
        self._holds.note(target_id, now)  # the hint first (tagpin.adapters.dynamodb.hints)
        values: Item = {
            ":s": S(TargetStatus.HELD),
            ":now": N(now),
            ":r": S(reason, TEXT_LIMIT),
            ":h": S(digest),
        }
        # what the hold is written over, read in this same write (a claim it interrupts: pending)
        sets = (
            "held_over = if_not_exists(#status, :none), held_over_at = if_not_exists(updated_at, :zero), "
            "held_over_claims = if_not_exists(claims, :no_claims), "
            "#status = :s, updated_at = :now, detail = :r, held_digest = :h"
        )
        values |= {":none": S(""), ":zero": N(0), ":no_claims": NO_CLAIMS}
        if until is not None:
            values[":u"] = N(until)
            sets += ", held_until = :u"
        # a second hold against the same digest writes nothing (a hold is recorded once)
        condition = "(attribute_not_exists(#status) OR #status <> :s OR held_digest <> :h)"
        if if_still is not None:  # and nothing was written since the state was read
            condition += " AND #status = :was_s AND digest = :was_d AND updated_at = :was_at"
            values |= {
                ":was_s": S(if_still.status),
                ":was_d": S(if_still.digest),
                ":was_at": N(if_still.updated_at),
            }
        state = update_write(
            key(TARGET + target_id),
            f"SET {sets} REMOVE claims" + ("" if until is not None else ", held_until"),
            condition=condition,
            names={"#status": "status"},
            values=values,
        )
        recorded = self._history.target_record(
            target_id,
            now,
            (digest_prefix(digest or "any"), TargetStatus.HELD.value),
            {"digest": digest, "status": TargetStatus.HELD.value, "trigger": trigger, "detail": reason},
            TEXT_LIMIT,
        )
        return self._table.transact([state, put_write(recorded), *self._image_item(event)])

    def _image_item(self, event: ImageEventRecord | None) -> list[Item]:
        """The put of an image's history item written with a target's state (``event``), if any:
        in the state's transaction, so that a process dying between two writes cannot leave the
        state written (its retry finding it so: False) and the item lost."""
        return [] if event is None else [put_write(self._history.image_record(event))]

    def release(self, target_id: str, now: int, *, reason: str, trigger: Trigger) -> bool:
        # pending: not settled at any digest, so the next check applies the tag's digest. A hold
        # written over a claim leaves the target pending as that claim left it (its time kept): a
        # hold written again is over the same claim (tagpin.usecases.interrupted).
        values: Item = {
            ":s": S(TargetStatus.HELD),
            ":p": S(TargetStatus.PENDING),
            ":r": S(reason, TEXT_LIMIT),
        }
        recorded = put_write(
            self._history.target_record(
                target_id,
                now,
                ("released",),
                {"status": "released", "trigger": trigger, "detail": reason},
                TEXT_LIMIT,
            )
        )
        # The claims in flight the hold stopped come back with it (whatever it was written over).
        values[":no_claims"] = NO_CLAIMS
        for at, extra, condition in (
            ("held_over_at", {":pending": S(TargetStatus.PENDING)}, " AND held_over = :pending"),
            (":now", {":now": N(now)}, ""),
        ):
            state = update_write(
                key(TARGET + target_id),
                f"SET #status = :p, updated_at = {at}, detail = :r,"
                " claims = if_not_exists(held_over_claims, :no_claims)"
                " REMOVE held_digest, held_until, held_over, held_over_at, held_over_claims",
                condition="#status = :s" + condition,
                names={"#status": "status"},
                values={**values, **extra},
            )
            if self._table.transact([state, recorded]):
                return True
        return False

    def interruption_settled(self, target_id: str, claimed_at: int) -> bool:
        return (
            self._table.update(
                key(TARGET + target_id),
                "REMOVE held_over, held_over_at, held_over_claims",
                condition="#status = :s AND held_over_at = :c",
                names={"#status": "status"},
                values={":s": S(TargetStatus.HELD), ":c": N(claimed_at)},
            )
            is not None
        )

    def forget_claims(self, target_id: str, claims: frozenset[int]) -> None:
        if claims:
            self._table.update(
                key(TARGET + target_id),
                "DELETE claims :old",
                values={":old": {"NS": [str(c) for c in sorted(claims)]}},
            )

    def held(self, limit: int, now: int) -> list[TargetState]:
        """The targets on hold (at most ``limit`` hints read), in target id order."""
        hints = self._holds.read(limit)
        states = self.get_many([h.key for h in hints])
        held = [
            state
            for h in hints
            if (state := states.get(h.key)) is not None
            and state.status is TargetStatus.HELD
            and (state.held_until is None or state.held_until > now)  # an ended hold is over
        ]
        self._holds.prune(hints, {s.target_id for s in held}, now)
        return held

    def remove(self, target_id: str, now: int, reason: str, *, since: int = 0) -> None:
        # Once per time the target was followed (since ``since``): a removal written again (the
        # reconciler's next run, after one that died before it dropped the index entry) finds the
        # target removed after ``since`` and writes nothing, neither state nor a second item.
        state = update_write(
            key(TARGET + target_id),
            "SET #status = :s, updated_at = :now, detail = :r REMOVE claims",
            condition="attribute_exists(pk) AND (#status <> :s OR updated_at < :since)",
            names={"#status": "status"},
            values={
                ":s": S(TargetStatus.REMOVED),
                ":now": N(now),
                ":r": S(reason, TEXT_LIMIT),
                ":since": N(since),
            },
        )
        recorded = self._history.target_record(
            target_id,
            now,
            ("removed",),
            {"status": TargetStatus.REMOVED.value, "trigger": Trigger.RECONCILE.value, "detail": reason},
            TEXT_LIMIT,
        )
        if self._table.transact([state, put_write(recorded)]):
            return
        if self._table.get(key(TARGET + target_id)) is None:  # never stored: its history alone
            self._table.put(recorded)

    def note(
        self, target_id: str, digest: Digest, note: TargetNote, now: int, detail: str, trigger: Trigger
    ) -> None:
        self._history.target_item(
            target_id,
            now,
            (digest_prefix(digest), note.value),
            {"digest": digest, "status": note.value, "trigger": trigger, "detail": detail},
            TEXT_LIMIT,
        )
