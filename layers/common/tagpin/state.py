"""tagpin's state in DynamoDB: the digest each followed tag points to, and what each target runs.

One table, ``pk``/``sk`` strings:

- ``TAG#<registry/repo:tag>`` / ``STATE``: the last digest seen, when (``observed_at``, epoch ms),
  when it last changed, when it was last checked and the last error.
- ``TARGET#<cluster/ns/kind/name/container>`` / ``STATE``: the digest being applied or applied,
  its ``observed_at``, status (pending, applied, failed, gone), trigger and time.
- ``TARGET#...`` / ``HIST#<epoch ms>#<digest prefix>``: the audit trail, one item per outcome
  (and ``removed`` when the reconciler stops following a target).
- ``FOLLOW`` / ``<registry/repo:tag>#<target id>``: the index of label-discovered targets, written
  by the reconciler, read by the poller, the webhook and the consumer (one partition: the whole
  index is one paged Query, one tag's targets a ``begins_with`` Query).
- ``CLUSTER#<name>`` / ``STATE``: the last reconcile of a cluster: when, ok or the error.
- ``CLUSTER#<name>`` / ``SLOTS``: the rollouts in progress in a cluster (``holders``: target id ->
  digest), for ``rollout.max_concurrent_per_cluster``.
- ``ROLLOUT#<registry/repo:tag>`` / ``STATE``: the promotion of the tag's newest digest through
  the waves: digest, active wave, status (rolling, complete, halted, dry_run), when the active
  wave was verified, which notices were sent (one per event, not per retry).
- ``IMAGE#<registry/repo:tag>`` / ``HIST#<epoch ms>#<digest prefix>#<event>``: the audit trail of
  an image (promotion started, wave applied, verified, failed, rolled back, dry-run plan).

A tag's ``bad_digest`` (set when a rollout of that digest failed) blocks that digest until the
tag moves to another one. History items carry ``expires_at`` (epoch seconds, DynamoDB TTL).

Every write that decides something is conditional on ``observed_at``, so two concurrent
invocations cannot both win and an older observation never replaces a newer one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

TAG = "TAG#"
TARGET = "TARGET#"
STATE = "STATE"
HISTORY = "HIST#"
POLL = "POLL"
CURSOR = "CURSOR"
FOLLOW = "FOLLOW"
CLUSTER = "CLUSTER#"
SLOTS = "SLOTS"
ROLLOUT = "ROLLOUT#"
IMAGE = "IMAGE#"
DAY_S = 86400


class TagUpdate(StrEnum):
    CHANGED = "changed"  # first sighting or a new digest: act on it
    UNCHANGED = "unchanged"  # same digest as stored
    STALE = "stale"  # a newer observation is already stored: ignore this one


class TargetStatus(StrEnum):
    PENDING = "pending"  # claimed, being patched, or deferred (maintenance window, concurrency)
    APPLIED = "applied"  # patched; the rollout is being verified
    VERIFIED = "verified"  # the workload rolled out completely on this digest
    ROLLED_BACK = "rolled_back"  # the digest failed; the previous image was restored
    FAILED = "failed"
    GONE = "gone"
    PAUSED = "paused"  # the workload is annotated tagpin.dev/paused
    REMOVED = "removed"  # no longer followed: the workload was deleted, unlabelled or paused


# A target in one of these states at the tag's digest needs nothing more from the level checks.
SETTLED = frozenset({TargetStatus.APPLIED, TargetStatus.VERIFIED})


class PromotionStatus(StrEnum):
    ROLLING = "rolling"  # the active wave is being applied, verified or soaked
    COMPLETE = "complete"  # every wave verified
    HALTED = "halted"  # a target failed: the digest is bad, nothing more is promoted
    DRY_RUN = "dry_run"  # the plan was recorded, nothing patched


@dataclass(frozen=True)
class Promotion:
    image: str
    digest: str
    observed_at: int
    wave: int
    status: PromotionStatus
    started_at: int
    updated_at: int
    wave_verified_at: int | None = None
    trigger: str | None = None
    correlation_id: str | None = None
    detail: str | None = None
    started: bool = False  # this call created it (a new digest, or a new promotion of it)


@dataclass(frozen=True)
class TagState:
    image: str
    digest: str
    observed_at: int
    changed_at: int
    checked_at: int
    last_error: str | None = None
    error_at: int | None = None
    bad_digest: str | None = None  # a rollout of this digest failed; cleared when the tag moves
    bad_reason: str | None = None

    @property
    def blocked(self) -> bool:
        """The tag points to a digest that failed: nothing applies it until the tag moves."""
        return self.bad_digest is not None and self.bad_digest == self.digest


@dataclass(frozen=True)
class TagRecord:
    result: TagUpdate
    current: TagState  # the state after the write (the stored newer one when STALE)
    previous_digest: str | None


@dataclass(frozen=True)
class TargetState:
    target_id: str
    image: str
    digest: str
    observed_at: int
    status: TargetStatus
    updated_at: int
    trigger: str | None = None
    detail: str | None = None
    previous_image: str | None = None

    def settled_at(self, digest: str) -> bool:
        """Applied or verified at ``digest``: not behind (the level checks skip it)."""
        return self.digest == digest and self.status in SETTLED


@dataclass(frozen=True)
class IndexEntry:
    """A label-discovered target of a followed tag."""

    image: str
    target_id: str
    cluster: str
    namespace: str
    kind: str
    name: str
    container: str
    seen_at: int = 0


@dataclass(frozen=True)
class ClusterState:
    name: str
    reconciled_at: int
    ok: bool
    error: str | None = None
    workloads: int = 0
    error_at: int | None = None


def _is_condition_failure(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


def _s(item: dict[str, Any], key: str) -> str | None:
    value = item.get(key)
    return None if value is None else str(value.get("S", value.get("N")))


def _n(item: dict[str, Any], key: str) -> int | None:
    value = item.get(key)
    return None if value is None else int(value["N"])


def _tag_state(image: str, item: dict[str, Any]) -> TagState:
    return TagState(
        image=image,
        digest=_s(item, "digest") or "",
        observed_at=_n(item, "observed_at") or 0,
        changed_at=_n(item, "changed_at") or 0,
        checked_at=_n(item, "checked_at") or 0,
        last_error=_s(item, "last_error"),
        error_at=_n(item, "error_at"),
        bad_digest=_s(item, "bad_digest"),
        bad_reason=_s(item, "bad_reason"),
    )


def _promotion(image: str, item: dict[str, Any], started: bool = False) -> Promotion:
    return Promotion(
        image=image,
        digest=_s(item, "digest") or "",
        observed_at=_n(item, "observed_at") or 0,
        wave=_n(item, "wave") or 0,
        status=PromotionStatus(_s(item, "status") or PromotionStatus.ROLLING),
        started_at=_n(item, "started_at") or 0,
        updated_at=_n(item, "updated_at") or 0,
        wave_verified_at=_n(item, "wave_verified_at"),
        trigger=_s(item, "trigger"),
        correlation_id=_s(item, "correlation_id"),
        detail=_s(item, "detail"),
        started=started,
    )


def _digest_prefix(digest: str) -> str:
    return digest.rsplit(":", maxsplit=1)[-1][:12]


def _target_state(item: dict[str, Any]) -> TargetState:
    return TargetState(
        target_id=(_s(item, "pk") or "").removeprefix(TARGET),
        image=_s(item, "image") or "",
        digest=_s(item, "digest") or "",
        observed_at=_n(item, "observed_at") or 0,
        status=TargetStatus(_s(item, "status") or TargetStatus.PENDING),
        updated_at=_n(item, "updated_at") or 0,
        trigger=_s(item, "trigger"),
        detail=_s(item, "detail"),
        previous_image=_s(item, "previous_image"),
    )


class StateStore:
    """DynamoDB adapter. ``client`` is a boto3 DynamoDB client (low-level, no resource layer)."""

    def __init__(self, client: Any, table: str, retention_days: Callable[[], int] = lambda: 90) -> None:
        self._db = client
        self._table = table
        self._retention_days = retention_days

    def _expires_at(self, now_ms: int) -> dict[str, str]:
        """The TTL attribute of a history item written at ``now_ms``."""
        return {"N": str(now_ms // 1000 + self._retention_days() * DAY_S)}

    # -- followed tags -------------------------------------------------------------------------
    def record_tag(self, image: str, digest: str, observed_at: int, trigger: str) -> TagRecord:
        """Store an observation of ``image`` -> ``digest``; say whether it changed anything."""
        key = {"pk": {"S": TAG + image}, "sk": {"S": STATE}}
        values = {":d": {"S": digest}, ":t": {"N": str(observed_at)}, ":tr": {"S": trigger}}
        # The common case first (a tag that did not move): only move the "last checked" mark
        # forward, one write. A moved tag costs a failed conditional write, then the change.
        try:
            new = self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET observed_at = :t, checked_at = :t REMOVE last_error, error_at",
                ConditionExpression="digest = :d AND observed_at < :t",
                ExpressionAttributeValues={":d": values[":d"], ":t": values[":t"]},
                ReturnValues="ALL_NEW",
            )["Attributes"]
            return TagRecord(TagUpdate.UNCHANGED, _tag_state(image, new), digest)
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise
        try:
            old = self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET digest = :d, observed_at = :t, changed_at = :t, checked_at = :t, "
                "#trigger = :tr REMOVE last_error, error_at, bad_digest, bad_reason, bad_at",
                # attribute_not_exists(digest), not (pk): record_tag_error may have created the item
                # (the first resolution failed) and a first sighting must still count as CHANGED.
                ConditionExpression="attribute_not_exists(digest) OR (observed_at < :t AND digest <> :d)",
                ExpressionAttributeNames={"#trigger": "trigger"},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_OLD",
            ).get("Attributes", {})
            previous = _s(old, "digest")
            state = TagState(image, digest, observed_at, observed_at, observed_at)
            return TagRecord(TagUpdate.CHANGED, state, previous)
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise
        current = self.get_tag(image)
        if current is None:  # deleted between the two writes: vanishingly rare; treat as stale
            current = TagState(image, digest, observed_at, observed_at, observed_at)
        result = TagUpdate.UNCHANGED if current.digest == digest else TagUpdate.STALE
        return TagRecord(result, current, current.digest)

    def record_tag_error(self, image: str, error: str, at: int) -> None:
        """Keep the working digest; note the error and when it happened."""
        self._db.update_item(
            TableName=self._table,
            Key={"pk": {"S": TAG + image}, "sk": {"S": STATE}},
            UpdateExpression="SET last_error = :e, error_at = :t",
            ExpressionAttributeValues={":e": {"S": error[:1000]}, ":t": {"N": str(at)}},
        )

    def get_tag(self, image: str) -> TagState | None:
        item = self._db.get_item(
            TableName=self._table, Key={"pk": {"S": TAG + image}, "sk": {"S": STATE}}, ConsistentRead=True
        ).get("Item")
        return None if item is None else _tag_state(image, item)

    def get_tags(self, images: list[str]) -> dict[str, TagState]:
        """Stored state of many tags (BatchGetItem, 100 keys a call, eventually consistent: the
        poller only uses it to skip writes when nothing changed; decisions stay conditional)."""
        found: dict[str, TagState] = {}
        ids = list(dict.fromkeys(images))
        for start in range(0, len(ids), 100):
            keys = [{"pk": {"S": TAG + i}, "sk": {"S": STATE}} for i in ids[start : start + 100]]
            request: dict[str, Any] = {self._table: {"Keys": keys}}
            while request:
                response = self._db.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    image = (_s(item, "pk") or "").removeprefix(TAG)
                    found[image] = _tag_state(image, item)
                request = response.get("UnprocessedKeys") or {}
        return found

    # -- the poller's cursor --------------------------------------------------------------------
    def get_poll_cursor(self) -> str | None:
        """Where the last poll that ran out of time stopped (the first image it did not finish)."""
        item = self._db.get_item(
            TableName=self._table, Key={"pk": {"S": POLL}, "sk": {"S": CURSOR}}, ConsistentRead=True
        ).get("Item")
        return None if item is None else _s(item, "image")

    def put_poll_cursor(self, image: str | None, at: int) -> None:
        """``None``: the last run finished every tag (producers never delete: the item stays, empty)."""
        item: dict[str, Any] = {"pk": {"S": POLL}, "sk": {"S": CURSOR}, "at": {"N": str(at)}}
        if image is not None:
            item["image"] = {"S": image}
        self._db.put_item(TableName=self._table, Item=item)

    # -- targets -------------------------------------------------------------------------------
    def get_targets(self, target_ids: list[str]) -> dict[str, TargetState]:
        found: dict[str, TargetState] = {}
        ids = list(dict.fromkeys(target_ids))
        for start in range(0, len(ids), 100):
            keys = [{"pk": {"S": TARGET + t}, "sk": {"S": STATE}} for t in ids[start : start + 100]]
            request: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": True}}
            while request:
                response = self._db.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    state = _target_state(item)
                    found[state.target_id] = state
                request = response.get("UnprocessedKeys") or {}
        return found

    def get_target(self, target_id: str) -> TargetState | None:
        return self.get_targets([target_id]).get(target_id)

    def claim_target(
        self,
        target_id: str,
        image: str,
        digest: str,
        observed_at: int,
        trigger: str,
        now: int,
        detail: str | None = None,
    ) -> bool:
        """Mark ``target_id`` as moving to ``digest``. False when a newer observation already holds it.

        Equal ``observed_at`` with the same digest is allowed, so a retried message re-claims; so is
        an older observation of the digest the target already holds (a wave promoted later, a
        deferred rollout started later), which leaves the newer ``observed_at`` in place.
        """
        values: dict[str, Any] = {
            ":i": {"S": image},
            ":d": {"S": digest},
            ":t": {"N": str(observed_at)},
            ":p": {"S": TargetStatus.PENDING.value},
            ":now": {"N": str(now)},
            ":tr": {"S": trigger},
        }
        tail = "REMOVE detail"
        if detail is not None:
            values[":detail"] = {"S": detail[:1000]}
            tail = ", detail = :detail"
        attempts = (
            (
                "SET image = :i, digest = :d, observed_at = :t, #status = :p, updated_at = :now, "
                "#trigger = :tr " + tail,
                "attribute_not_exists(pk) OR observed_at < :t OR (observed_at = :t AND digest = :d)",
                values,
            ),
            (
                "SET #status = :p, updated_at = :now, #trigger = :tr " + tail,
                "digest = :d",
                {k: v for k, v in values.items() if k not in (":i", ":t")},
            ),
        )
        for update, condition, attribute_values in attempts:
            try:
                self._db.update_item(
                    TableName=self._table,
                    Key={"pk": {"S": TARGET + target_id}, "sk": {"S": STATE}},
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#status": "status", "#trigger": "trigger"},
                    ExpressionAttributeValues=attribute_values,
                )
                return True
            except ClientError as exc:
                if not _is_condition_failure(exc):
                    raise
        return False

    def finish_target(
        self,
        target_id: str,
        digest: str,
        status: TargetStatus,
        now: int,
        *,
        trigger: str,
        detail: str | None = None,
        previous_image: str | None = None,
        correlation_id: str | None = None,
        expected: frozenset[TargetStatus] | None = None,
        extra: dict[str, str] | None = None,
    ) -> bool:
        """Record how applying ``digest`` ended, if the target still holds that digest; add history.

        With ``expected``, only a target in one of those states moves (a transition of the
        rollout: applied -> verified, applied -> failed, failed -> rolled_back): False, and no
        history, when another invocation made the transition first."""
        names = {"#status": "status"}
        values: dict[str, Any] = {
            ":d": {"S": digest},
            ":s": {"S": status.value},
            ":now": {"N": str(now)},
        }
        condition = "digest = :d"
        if expected:
            options = []
            for i, allowed in enumerate(sorted(expected)):
                values[f":e{i}"] = {"S": allowed.value}
                options.append(f":e{i}")
            condition += f" AND #status IN ({', '.join(options)})"
        sets = ["#status = :s", "updated_at = :now"]
        if detail is not None:
            sets.append("detail = :detail")
            values[":detail"] = {"S": detail[:1000]}
        if previous_image is not None:
            sets.append("previous_image = :prev")
            values[":prev"] = {"S": previous_image}
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": {"S": TARGET + target_id}, "sk": {"S": STATE}},
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
            held = True
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise
            held = False
        if expected and not held:
            return False
        history: dict[str, Any] = {
            "pk": {"S": TARGET + target_id},
            "sk": {"S": f"{HISTORY}{now:013d}#{_digest_prefix(digest)}#{status.value}"},
            "digest": {"S": digest},
            "status": {"S": status.value if held else "superseded"},
            "at": {"N": str(now)},
            "trigger": {"S": trigger},
            "expires_at": self._expires_at(now),
        }
        for key, value in (
            ("detail", detail),
            ("previous_image", previous_image),
            ("correlation_id", correlation_id),
            *(extra or {}).items(),
        ):
            if value:
                history[key] = {"S": value[:1000]}
        self._db.put_item(TableName=self._table, Item=history)
        return held

    def history(self, target_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The audit trail of a target, newest first."""
        return self._history(TARGET + target_id, limit)

    # -- the index of followed tag -> label-discovered targets ----------------------------------
    def index_entries(self, image: str | None = None) -> list[IndexEntry]:
        """Every indexed target, or those of one tag (one paged Query either way)."""
        condition = "pk = :pk"
        values: dict[str, Any] = {":pk": {"S": FOLLOW}}
        if image is not None:
            condition += " AND begins_with(sk, :prefix)"
            values[":prefix"] = {"S": image + "#"}
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        entries: list[IndexEntry] = []
        while True:
            response = self._db.query(**request)
            for item in response.get("Items", []):
                entries.append(
                    IndexEntry(
                        image=_s(item, "image") or "",
                        target_id=_s(item, "target_id") or "",
                        cluster=_s(item, "cluster") or "",
                        namespace=_s(item, "namespace") or "",
                        kind=_s(item, "kind") or "",
                        name=_s(item, "name") or "",
                        container=_s(item, "container") or "",
                        seen_at=_n(item, "seen_at") or 0,
                    )
                )
            last = response.get("LastEvaluatedKey")
            if not last:
                return entries
            request["ExclusiveStartKey"] = last

    def update_index(self, put: list[IndexEntry], delete: list[IndexEntry]) -> None:
        """Add and remove index entries (batched, unprocessed items retried)."""
        requests: list[dict[str, Any]] = [
            {"DeleteRequest": {"Key": {"pk": {"S": FOLLOW}, "sk": {"S": f"{e.image}#{e.target_id}"}}}}
            for e in delete
        ]
        for e in put:
            item = {
                "pk": {"S": FOLLOW},
                "sk": {"S": f"{e.image}#{e.target_id}"},
                "image": {"S": e.image},
                "target_id": {"S": e.target_id},
                "cluster": {"S": e.cluster},
                "namespace": {"S": e.namespace},
                "kind": {"S": e.kind},
                "name": {"S": e.name},
                "container": {"S": e.container},
                "seen_at": {"N": str(e.seen_at)},
            }
            requests.append({"PutRequest": {"Item": item}})
        for start in range(0, len(requests), 25):
            pending: dict[str, Any] = {self._table: requests[start : start + 25]}
            while pending:
                pending = self._db.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}

    def remove_target(self, target_id: str, now: int, reason: str) -> None:
        """Record that a target is no longer followed (its state item, if any, and its history)."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": {"S": TARGET + target_id}, "sk": {"S": STATE}},
                UpdateExpression="SET #status = :s, updated_at = :now, detail = :r",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":s": {"S": TargetStatus.REMOVED.value},
                    ":now": {"N": str(now)},
                    ":r": {"S": reason[:1000]},
                },
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise
        self._db.put_item(
            TableName=self._table,
            Item={
                "pk": {"S": TARGET + target_id},
                "sk": {"S": f"{HISTORY}{now:013d}#removed"},
                "status": {"S": TargetStatus.REMOVED.value},
                "at": {"N": str(now)},
                "trigger": {"S": "reconcile"},
                "detail": {"S": reason[:1000]},
                "expires_at": self._expires_at(now),
            },
        )

    def target_note(
        self, target_id: str, digest: str, status: str, now: int, detail: str, trigger: str
    ) -> None:
        """A history item only (a dry-run plan, a deferral): the target's state is left alone."""
        self._db.put_item(
            TableName=self._table,
            Item={
                "pk": {"S": TARGET + target_id},
                "sk": {"S": f"{HISTORY}{now:013d}#{_digest_prefix(digest)}#{status}"},
                "digest": {"S": digest},
                "status": {"S": status},
                "at": {"N": str(now)},
                "trigger": {"S": trigger},
                "detail": {"S": detail[:1000]},
                "expires_at": self._expires_at(now),
            },
        )

    # -- bad digests ----------------------------------------------------------------------------
    def mark_bad(self, image: str, digest: str, reason: str, now: int) -> bool:
        """Block ``digest`` for ``image`` while the tag points to it (False: the tag moved on)."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": {"S": TAG + image}, "sk": {"S": STATE}},
                UpdateExpression="SET bad_digest = :d, bad_reason = :r, bad_at = :now",
                ConditionExpression="digest = :d",
                ExpressionAttributeValues={
                    ":d": {"S": digest},
                    ":r": {"S": reason[:1000]},
                    ":now": {"N": str(now)},
                },
            )
            return True
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise
            return False

    # -- promotions -----------------------------------------------------------------------------
    def start_promotion(
        self,
        image: str,
        digest: str,
        observed_at: int,
        now: int,
        *,
        trigger: str,
        correlation_id: str | None,
        dry_run: bool,
    ) -> Promotion | None:
        """The promotion of ``digest``: started here when it is newer than the stored one (a newer
        digest supersedes an older one's promotion), else the stored one. None when a newer digest
        holds the tag's promotion. A dry-run promotion is replaced by a real one when dry-run is off."""
        key = {"pk": {"S": ROLLOUT + image}, "sk": {"S": STATE}}
        status = PromotionStatus.DRY_RUN if dry_run else PromotionStatus.ROLLING
        values: dict[str, Any] = {
            ":d": {"S": digest},
            ":t": {"N": str(observed_at)},
            ":now": {"N": str(now)},
            ":zero": {"N": "0"},
            ":s": {"S": status.value},
            ":tr": {"S": trigger},
            ":c": {"S": correlation_id or ""},
        }
        condition = "attribute_not_exists(pk) OR (digest <> :d AND observed_at < :t)"
        if not dry_run:
            condition += " OR (digest = :d AND #status = :dry)"
            values[":dry"] = {"S": PromotionStatus.DRY_RUN.value}
        request: dict[str, Any] = {
            "TableName": self._table,
            "Item": {
                **key,
                "digest": values[":d"],
                "observed_at": values[":t"],
                "wave": values[":zero"],
                "status": values[":s"],
                "started_at": values[":now"],
                "updated_at": values[":now"],
                "trigger": values[":tr"],
                "correlation_id": values[":c"],
            },
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {k: v for k, v in values.items() if k in (":d", ":t", ":dry")},
        }
        if not dry_run:
            request["ExpressionAttributeNames"] = {"#status": "status"}
        try:
            self._db.put_item(**request)
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise
            current = self.get_promotion(image)
            return current if current is not None and current.digest == digest else None
        return _promotion(image, request["Item"], started=True)

    def get_promotion(self, image: str) -> Promotion | None:
        item = self._db.get_item(
            TableName=self._table, Key={"pk": {"S": ROLLOUT + image}, "sk": {"S": STATE}}, ConsistentRead=True
        ).get("Item")
        return None if item is None else _promotion(image, item)

    def _promotion_update(
        self, image: str, digest: str, update: str, condition: str, values: dict[str, Any]
    ) -> bool:
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": {"S": ROLLOUT + image}, "sk": {"S": STATE}},
                UpdateExpression=update,
                ConditionExpression="digest = :d AND " + condition,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":d": {"S": digest}, **values},
            )
            return True
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise
            return False

    def wave_verified(self, image: str, digest: str, wave: int, now: int) -> bool:
        """Every target of the active wave is verified: start its soak (once)."""
        return self._promotion_update(
            image,
            digest,
            "SET wave_verified_at = :now, updated_at = :now",
            "wave = :w AND #status = :rolling AND attribute_not_exists(wave_verified_at)",
            {
                ":w": {"N": str(wave)},
                ":now": {"N": str(now)},
                ":rolling": {"S": PromotionStatus.ROLLING.value},
            },
        )

    def advance_promotion(self, image: str, digest: str, wave: int, now: int) -> bool:
        """Move from the verified, soaked ``wave`` to the next one (exactly one caller wins)."""
        return self._promotion_update(
            image,
            digest,
            "SET wave = :next, updated_at = :now REMOVE wave_verified_at",
            "wave = :w AND #status = :rolling AND attribute_exists(wave_verified_at)",
            {
                ":w": {"N": str(wave)},
                ":next": {"N": str(wave + 1)},
                ":now": {"N": str(now)},
                ":rolling": {"S": PromotionStatus.ROLLING.value},
            },
        )

    def end_promotion(self, image: str, digest: str, status: PromotionStatus, now: int, detail: str) -> bool:
        """Complete or halt a rolling promotion (exactly one caller wins)."""
        return self._promotion_update(
            image,
            digest,
            "SET #status = :s, updated_at = :now, detail = :detail",
            "#status = :rolling",
            {
                ":s": {"S": status.value},
                ":now": {"N": str(now)},
                ":detail": {"S": detail[:1000]},
                ":rolling": {"S": PromotionStatus.ROLLING.value},
            },
        )

    def claim_notice(self, image: str, digest: str, notice: str, now: int) -> bool:
        """True once per (promotion, notice): one notification per event, not one per retry."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": {"S": ROLLOUT + image}, "sk": {"S": STATE}},
                UpdateExpression="SET #n = :now",
                ConditionExpression="digest = :d AND attribute_not_exists(#n)",
                ExpressionAttributeNames={"#n": "notice_" + notice},
                ExpressionAttributeValues={":d": {"S": digest}, ":now": {"N": str(now)}},
            )
            return True
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise
            return False

    def image_event(
        self, image: str, digest: str, event: str, now: int, *, detail: str = "", **fields: str | int | None
    ) -> None:
        """One item of an image's audit trail."""
        item: dict[str, Any] = {
            "pk": {"S": IMAGE + image},
            "sk": {"S": f"{HISTORY}{now:013d}#{_digest_prefix(digest)}#{event}"},
            "digest": {"S": digest},
            "event": {"S": event},
            "at": {"N": str(now)},
            "expires_at": self._expires_at(now),
        }
        if detail:
            item["detail"] = {"S": detail[:4000]}
        for key, value in fields.items():
            if isinstance(value, int):
                item[key] = {"N": str(value)}
            elif value:
                item[key] = {"S": value[:4000]}
        self._db.put_item(TableName=self._table, Item=item)

    def image_history(self, image: str, limit: int = 100) -> list[dict[str, Any]]:
        """The audit trail of an image, newest first."""
        return self._history(IMAGE + image, limit)

    def _history(self, pk: str, limit: int) -> list[dict[str, Any]]:
        response = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :h)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":h": {"S": HISTORY}},
            ScanIndexForward=False,
            Limit=limit,
        )
        return [{k: next(iter(v.values())) for k, v in item.items()} for item in response.get("Items", [])]

    # -- concurrency per cluster ----------------------------------------------------------------
    def acquire_slot(
        self, cluster: str, target_id: str, digest: str, limit: int, now: int, stale_ms: int
    ) -> bool:
        """Hold one of ``limit`` rollout slots of ``cluster`` for ``target_id`` (already held: True).
        Holders older than ``stale_ms`` (a verification that never ended) are dropped when full."""
        key = {"pk": {"S": CLUSTER + cluster}, "sk": {"S": SLOTS}}
        holder = {"M": {"digest": {"S": digest}, "at": {"N": str(now)}}}
        for attempt in range(2):
            self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET holders = if_not_exists(holders, :empty)",
                ExpressionAttributeValues={":empty": {"M": {}}},
            )
            try:
                self._db.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression="SET holders.#t = :h",
                    ConditionExpression="attribute_exists(holders.#t) OR size(holders) < :max",
                    ExpressionAttributeNames={"#t": target_id},
                    ExpressionAttributeValues={":h": holder, ":max": {"N": str(limit)}},
                )
                return True
            except ClientError as exc:
                if not _is_condition_failure(exc):
                    raise
            if attempt == 0 and not self._drop_stale_slots(cluster, now - stale_ms):
                return False
        return False

    def _drop_stale_slots(self, cluster: str, before: int) -> bool:
        item = self._db.get_item(
            TableName=self._table,
            Key={"pk": {"S": CLUSTER + cluster}, "sk": {"S": SLOTS}},
            ConsistentRead=True,
        ).get("Item", {})
        holders = item.get("holders", {}).get("M", {})
        stale = [t for t, h in holders.items() if int(h["M"]["at"]["N"]) < before]
        for target_id in stale:
            self.release_slot(cluster, target_id, holders[target_id]["M"]["digest"]["S"])
        return bool(stale)

    def release_slot(self, cluster: str, target_id: str, digest: str) -> None:
        """Give the slot back, if ``target_id`` still holds it for ``digest``."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": {"S": CLUSTER + cluster}, "sk": {"S": SLOTS}},
                UpdateExpression="REMOVE holders.#t",
                ConditionExpression="holders.#t.digest = :d",
                ExpressionAttributeNames={"#t": target_id},
                ExpressionAttributeValues={":d": {"S": digest}},
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise

    def slot_holders(self, cluster: str) -> dict[str, str]:
        item = self._db.get_item(
            TableName=self._table,
            Key={"pk": {"S": CLUSTER + cluster}, "sk": {"S": SLOTS}},
            ConsistentRead=True,
        ).get("Item", {})
        return {t: h["M"]["digest"]["S"] for t, h in item.get("holders", {}).get("M", {}).items()}

    # -- clusters ------------------------------------------------------------------------------
    def record_cluster(self, name: str, now: int, *, error: str | None = None, workloads: int = 0) -> None:
        """The outcome of reconciling one cluster: ok with its workload count, or skipped with the error."""
        key = {"pk": {"S": CLUSTER + name}, "sk": {"S": STATE}}
        if error is None:
            self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET reconciled_at = :now, ok = :ok, workloads = :w REMOVE last_error",
                ExpressionAttributeValues={
                    ":now": {"N": str(now)},
                    ":ok": {"BOOL": True},
                    ":w": {"N": str(workloads)},
                },
            )
            return
        self._db.update_item(
            TableName=self._table,
            Key=key,
            UpdateExpression="SET reconciled_at = :now, ok = :ok, last_error = :e, error_at = :now",
            ExpressionAttributeValues={
                ":now": {"N": str(now)},
                ":ok": {"BOOL": False},
                ":e": {"S": error[:1000]},
            },
        )

    def get_cluster(self, name: str) -> ClusterState | None:
        item = self._db.get_item(
            TableName=self._table, Key={"pk": {"S": CLUSTER + name}, "sk": {"S": STATE}}, ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        return ClusterState(
            name=name,
            reconciled_at=_n(item, "reconciled_at") or 0,
            ok=bool(item.get("ok", {}).get("BOOL")),
            error=_s(item, "last_error"),
            workloads=_n(item, "workloads") or 0,
            error_at=_n(item, "error_at"),
        )
