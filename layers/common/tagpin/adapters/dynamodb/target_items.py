"""A ``TARGET#<target id>`` / ``STATE`` item read as a ``TargetState`` (``tagpin.adapters.dynamodb.targets``
writes them; ``promotions`` reads a trigger the same way)."""

from __future__ import annotations

from tagpin.adapters.dynamodb.table import TARGET, Item, digest_at, digest_if, followed_key, number, text
from tagpin.domain.messages import Trigger
from tagpin.ports.state import TargetState, TargetStatus


def trigger_of(item: Item) -> Trigger | None:
    value = text(item, "trigger")
    try:
        return None if value is None else Trigger(value)
    except ValueError:  # written by another version: shown as unknown, never an error
        return None


# What a console row shows of a target (``Targets.shown``): its id, status, digest, detail, when it
# was updated, and its hold's digest and end.
SHOWN_ATTRIBUTES = ["pk", "status", "digest", "detail", "updated_at", "held_digest", "held_until"]


def target_state(item: Item) -> TargetState:
    return TargetState(
        target_id=(text(item, "pk") or "").removeprefix(TARGET),
        image=followed_key(item),
        digest=digest_at(item),
        observed_at=number(item, "observed_at") or 0,
        status=TargetStatus(text(item, "status") or TargetStatus.PENDING),
        updated_at=number(item, "updated_at") or 0,
        trigger=trigger_of(item),
        detail=text(item, "detail"),
        previous_image=text(item, "previous_image"),
        held_digest=digest_if(item, "held_digest"),
        held_until=number(item, "held_until"),
        held_over=_status_or_none(text(item, "held_over")),
        held_over_at=number(item, "held_over_at"),
        claims=numbers(item, "claims"),
        held_over_claims=numbers(item, "held_over_claims"),
        commit=text(item, "applied_commit"),
    )


# A number set cannot be empty: a copy of one that did not exist is this one (``if_not_exists``).
NO_CLAIMS = {"NS": ["0"]}


def numbers(item: Item, name: str) -> frozenset[int]:
    """A number set of claim times (``NO_CLAIMS``' 0 is none)."""
    value = item.get(name)
    return frozenset() if value is None else frozenset(int(n) for n in value["NS"]) - {0}


def _status_or_none(value: str | None) -> TargetStatus | None:
    try:
        return TargetStatus(value) if value else None
    except ValueError:  # written by another version
        return None
