"""Messages that cross process boundaries: the change and the delayed rollout verification, both on
the changes queue (the one queue the consumer reads), and the per-target unit of work."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    TypeAdapter,
    model_serializer,
    model_validator,
)
from pydantic_core import to_json

from tagpin.domain import moves
from tagpin.domain.moves import Move, Trigger
from tagpin.domain.refs import Digest

if TYPE_CHECKING:
    from tagpin.domain.config.targets import Target

# ``Trigger`` is the move's (``tagpin.domain.moves``); it is found here as it always was.
__all__ = [
    "CarriesMove",
    "Change",
    "Message",
    "OnceKey",
    "TargetChange",
    "Trigger",
    "Verification",
    "VerificationKind",
    "parse_message",
]


def _lifted(data: Any, default_trigger: Trigger | None = None) -> Any:
    """A message as deployed stacks wrote it, before messages carried the move (still in flight on
    the queue, or in its dead-letter queue): its flat move fields (``image``, ``digest``,
    ``observed_at``, ...) read into ``move``. A message with a ``move`` is left as it is."""
    if not isinstance(data, dict) or "move" in data or not any(k in data for k in moves.FIELDS):
        return data
    rest = {k: v for k, v in data.items() if k not in moves.FIELDS}
    move = {k: data[k] for k in moves.FIELDS if data.get(k) is not None}
    if default_trigger is not None:
        move.setdefault("trigger", default_trigger)
    return {**rest, "move": move}


class CarriesMove(BaseModel):
    """A message that carries a ``move`` (a change, a verification, a write request), read in
    either shape and written in both for this release.

    Read: the flat shape deployed stacks wrote is lifted into ``move`` (``_lifted``); a verification
    sent without a trigger gets ``flat_default_trigger``. Written: the move whole under ``move``,
    and its fields again flat beside it, as the stacks before it wrote them. Those stacks' models
    ignore keys they do not know (``extra="ignore"``), so a stack rolled back to the version before
    this one still reads what this one sent, instead of sending it to the dead-letter queue
    (``tests/unit/test_wire_rollback.py`` reads it with that version's models). This version reads
    ``move`` and ignores the flat copy. A later release may stop writing it."""

    flat_default_trigger: ClassVar[Trigger | None] = None

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, data: Any) -> Any:
        return _lifted(data, default_trigger=cls.flat_default_trigger)

    @model_serializer(mode="wrap")
    def _both_shapes(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        move = data.get("move") if isinstance(data, dict) else None
        if not isinstance(move, dict):  # ``move`` excluded: nothing to write twice
            return data
        return {**{k: move[k] for k in moves.FIELDS if k in move}, **data}

    def _flat_json(self, order: tuple[str, ...]) -> str:
        """The message as deployed stacks wrote it before the move was carried: the fields named
        in ``order`` (their order then), ``None`` left out, as ``model_dump_json(exclude_none=True)``
        wrote them. The queues' deduplication ids hash this, so they stay the same."""
        fields = self.model_dump(mode="json", exclude_none=True)
        fields.update(fields.pop("move", {}))
        return to_json({k: fields[k] for k in order if fields.get(k) is not None}).decode()


class Change(CarriesMove):
    """A followed tag was seen pointing at a digest: its ``move``. The body of every message on the
    changes queue but the verifications."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    move: Move
    # Set by the reconciler when it saw a target NOT running the digest although the consumer may
    # already have applied it (a manual edit, a rollback): the run's id joins the idempotency and
    # deduplication keys, so the change is applied again instead of being answered from the cache.
    reconcile_run: str | None = Field(default=None, max_length=128)
    # Set by the verifier on a promotion's own changes (the next wave, a deferred retry): joins the
    # deduplication id only, so the FIFO queue does not drop it as a repeat of the first change.
    round: str | None = Field(default=None, max_length=128)


class OnceKey(NamedTuple):
    """What makes one target's move happen once (the consumer's idempotency guard hashes it): the
    target and digest, the move (``changed_at``: a tag come back to an earlier digest is a new one)
    and a reconcile run's healing. Its order and values are those the guard hashed when it read
    them from the message with the JMESPath ``[target_id, digest, changed_at, reconcile_run]``, so
    the records deployed stacks stored keep answering."""

    target_id: str
    digest: Digest
    changed_at: int | None
    reconcile_run: str | None


class TargetChange(BaseModel):
    """One target to move to one digest: the unit that is made idempotent (``key``)."""

    model_config = ConfigDict(frozen=True)

    target_id: str
    cluster: str
    namespace: str
    kind: str
    name: str
    container: str
    move: Move
    reconcile_run: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, data: Any) -> Any:
        return _lifted(data)

    @classmethod
    def of(cls, target: Target, move: Move, reconcile_run: str | None = None) -> TargetChange:
        """``target`` moved by ``move`` (a reconcile run's healing: ``reconcile_run``)."""
        return cls(
            target_id=target.id,
            cluster=target.cluster,
            namespace=target.namespace,
            kind=target.kind.value,
            name=target.name,
            container=target.container,
            move=move,
            reconcile_run=reconcile_run,
        )

    @property
    def key(self) -> OnceKey:
        """Its idempotency key: one roll per key."""
        return OnceKey(self.target_id, self.move.digest, self.move.changed_at, self.reconcile_run)


class VerificationKind(StrEnum):
    VERIFY = (
        "verify"  # is the patched target rolled out, still progressing (look again) or failed (roll back)?
    )
    ADVANCE = "advance"  # the active wave was verified; once its soak time has passed, promote the next wave
    RETRY = "retry"  # a rollout was deferred (maintenance window, concurrency limit); re-send the change
    EXPIRE = "expire"  # an approval request's time is up: it lapses if still unanswered (attempt: the wave)


class Verification(CarriesMove):
    """A delayed rollout verification: a message on the changes queue, handled by the consumer once
    it is due (``due_at``).

    A Lambda must not sleep while a Deployment rolls out, so every "look again later" of a rollout
    is a verification. The changes queue is FIFO, which has no per-message delay: the sender sets
    ``due_at`` and the consumer hides a verification it receives early until then
    (``tagpin.adapters.sqs``). Each verification is its own message group, so it never waits behind
    a tag's changes nor holds them up, and it may be delivered more than once: every step decides
    through conditional writes in the state table, so a duplicate changes nothing.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: VerificationKind
    move: Move  # what is verified; the verifier's (``Trigger.VERIFY``) in one sent without a trigger
    target_id: str | None = None  # verify: the target
    applied_at: int | None = None  # verify: when the patch was made (epoch ms), for the timeout
    # verify: when the rollout was last seen paused (epoch ms): the timeout counts from then
    paused_at: int | None = None
    # verify: when the pause it is held at now was first seen (epoch ms): the pause's length, for
    # rollout.max_pause_seconds and the look-again delay; None while it is not paused
    paused_since: int | None = None
    attempt: int = Field(default=0, ge=0)
    # verify: the Git commit that moved the target (write-back, docs/gitops.md): the workload
    # reaches the digest once the GitOps tool applies it, so until then it is waited for
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{40,64}$")
    # When it is due (epoch ms, the sender's clock); None: at once. Set by the queue when sent.
    due_at: int | None = Field(default=None, ge=0)

    flat_default_trigger: ClassVar[Trigger | None] = Trigger.VERIFY

    def flat_json(self) -> str:
        """This verification as deployed stacks wrote it before the move was carried. The queue's
        deduplication id hashes this (``tagpin.adapters.sqs``), so it is the same for the same
        verification before and after."""
        return self._flat_json(_FLAT_VERIFICATION)

    def again(self) -> Verification:
        """Again, for a rollout in progress (not paused: a later pause is a new one)."""
        return self.model_copy(update={"attempt": self.attempt + 1, "due_at": None, "paused_since": None})

    def paused(self, now_ms: int) -> Verification:
        """Again, for a rollout held at a pause step now: its timeout starts over from here, and
        the pause counts from when it was first seen."""
        return self.model_copy(
            update={
                "attempt": self.attempt + 1,
                "due_at": None,
                "paused_at": now_ms,
                "paused_since": self.pause_started(now_ms),
            }
        )

    def pause_started(self, now_ms: int) -> int:
        """When the pause the rollout is held at was first seen: ``now_ms`` for a new one (and for
        a verification sent before ``paused_since`` existed: its pause counts from this check)."""
        return self.paused_since or now_ms

    def timed_from(self, fallback_ms: int) -> int:
        """Where the verify timeout counts from: the patch (``fallback_ms`` when unknown), or the
        last check that found the rollout paused (a pause is not a rollout taking too long)."""
        return max(self.applied_at or fallback_ms, self.paused_at or 0)

    def wait_ms(self, now_ms: int) -> int:
        """How long until it is due (0: due now)."""
        return max(0, (self.due_at or 0) - now_ms)


# A verification's fields, flat, in the order deployed stacks wrote them (``Verification.flat_json``).
_FLAT_VERIFICATION = (
    *("kind", "image", "digest", "observed_at", "target_id", "applied_at", "paused_at", "paused_since"),
    *("attempt", "trigger", "correlation_id", "commit", "due_at"),
)


def _message_kind(value: object) -> str:
    """A verification carries ``kind``; a change does not (messages sent before verifications
    shared the queue carry no marker, so the shape decides)."""
    fields = value if isinstance(value, dict) else vars(value)
    return "verification" if "kind" in fields else "change"


Message = Annotated[
    Annotated[Change, Tag("change")] | Annotated[Verification, Tag("verification")],
    Discriminator(_message_kind),
]
_MESSAGE: TypeAdapter[Change | Verification] = TypeAdapter(Message)


def parse_message(body: str | bytes) -> Change | Verification:
    """The body of a message on the changes queue (``pydantic.ValidationError`` if it is neither)."""
    return _MESSAGE.validate_json(body)
