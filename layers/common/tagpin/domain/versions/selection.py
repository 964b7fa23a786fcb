"""Choosing the head of a version channel, and saying why the newer tags were not chosen.

``select_head`` is what ``tagpin plan`` prints: the head (the newest version the policy allows that
is neither marked bad nor, when an allowed set is given, unverified) and, newest first, every
rejected version that would have been chosen over it, each with its ``Reason``. The result depends
on the set of tags only, never on their order: ``Version.rank`` is a total order.

``move`` guards the other side: a channel's head only ever moves forward. Tags get deleted, a version
gets marked bad, a policy gets edited: the newest allowed version can then be older than what
runs, and moving to it would be a downgrade nobody asked for.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum
from operator import itemgetter
from typing import Any

from tagpin.domain.versions.policy import Reason, VersionPolicy
from tagpin.domain.versions.tags import Reading, Version, rank

_first = itemgetter(0)

DEFAULT_LIMIT = 50


@dataclass(frozen=True, slots=True)
class Rejection:
    """A tag that was not chosen, and the first reason why (``Reason``'s order)."""

    tag: str
    reason: Reason
    version: Version | None = None  # None when the tag is not a version


@dataclass(frozen=True, slots=True)
class Selection:
    """The head of a channel and why the tags that would have been chosen over it were not.

    ``rejected``: the rejected versions ranked above the head (every rejected version when there is
    no head), newest first, then the tags that are not versions of the policy's kind, in code-point
    order; at most ``limit`` of them, ``omitted`` counts the rest. Rejected versions older than the
    head are not listed: they would not have been chosen anyway.
    """

    head: Version | None
    rejected: tuple[Rejection, ...]
    omitted: int = 0

    @property
    def head_tag(self) -> str | None:
        return None if self.head is None else self.head.tag


class VersionSet:
    """Tags of a policy's versions (marked bad, or verified): a tag is in the set when it is listed,
    or when the policy reads it as the same version and build as one listed, whatever the spelling
    (``v1.4.2`` is ``1.4.2``: ``Version.identity``). How every part of tagpin asks whether a
    version is marked bad: the choice of a head, a push, a move of the head, a rollback, a
    downgrade."""

    __slots__ = ("identities", "rules", "tags")

    def __init__(self, policy: VersionPolicy, entries: Iterable[str]) -> None:
        self.rules = policy.rules  # raises for a digest policy
        self.tags = frozenset(entries)
        readings = (self.rules.read(tag) for tag in self.tags)
        self.identities = frozenset((r[0], r[3]) for r in readings if r is not None)  # Version.identity

    def __contains__(self, tag: object) -> bool:
        if not isinstance(tag, str):
            return False
        if tag in self.tags:
            return True
        reading = self.rules.read(tag)
        return reading is not None and (reading[0], reading[3]) in self.identities

    def __bool__(self) -> bool:
        return bool(self.tags)

    def holds(self, tag: str, key: tuple[Any, ...], build: str) -> bool:
        """``tag``, already read as ``key`` and ``build``, is in the set."""
        return tag in self.tags or (key, build) in self.identities


def select_head(
    policy: VersionPolicy,
    tags: Iterable[str],
    *,
    bad: Collection[str] = (),
    allowed: Collection[str] | None = None,
    limit: int = DEFAULT_LIMIT,
) -> Selection:
    """The newest tag of ``tags`` that ``policy`` allows, is not in ``bad`` and, when ``allowed`` is
    given (e.g. the versions verified in the previous stage of a promotion), is in ``allowed``.

    ``bad`` and ``allowed`` hold tags, or versions spelt any way the policy reads as the same version.
    Raises ValueError for a ``digest`` policy, which has nothing to choose.
    """
    rules = policy.rules  # raises for a digest policy
    if limit < 0:
        raise ValueError(f"limit must be >= 0, not {limit}")
    marked_bad = VersionSet(policy, bad)
    verified = None if allowed is None else VersionSet(policy, allowed)
    read, refusal = rules.read, rules.refusal
    best: tuple[Any, ...] | None = None  # the head's rank
    head: tuple[str, Reading] | None = None
    refused: list[tuple[tuple[Any, ...], str, Reason, Reading]] = []
    unread: list[str] = []
    for tag in set(tags):
        reading = read(tag)
        if reading is None:
            unread.append(tag)
            continue
        key, _, prerelease, build = reading
        reason = refusal(tag, key, prerelease)
        if reason is None and marked_bad.holds(tag, key, build):
            reason = Reason.BAD
        elif reason is None and verified is not None and not verified.holds(tag, key, build):
            reason = Reason.NOT_VERIFIED
        ranked = rank(tag, key)
        if best is not None and ranked < best:
            continue  # older than a version already allowed: neither the head nor worth a reason
        if reason is not None:
            refused.append((ranked, tag, reason, reading))
        else:
            best, head = ranked, (tag, reading)
    if best is not None:
        refused = [r for r in refused if r[0] > best]
    shown = [
        Rejection(t, why, Version.of(t, r)) for _, t, why, r in heapq.nlargest(limit, refused, key=_first)
    ]
    if len(shown) < limit:
        shown += [Rejection(t, Reason.NOT_A_VERSION) for t in heapq.nsmallest(limit - len(shown), unread)]
    return Selection(
        None if head is None else Version.of(*head), tuple(shown), len(refused) + len(unread) - len(shown)
    )


class Step(StrEnum):
    """What moving a channel from its current head to a candidate would be."""

    UPGRADE = "upgrade"  # a newer version: move
    SAME = "same"  # the same version (another spelling or build: 1.4.2 and v1.4.2+build.7): stay
    DOWNGRADE = "downgrade"  # an older version: never by accident
    UNKNOWN = "unknown"  # a tag that is not a version of the policy's kind: cannot be ordered


def move(policy: VersionPolicy, current: str | None, candidate: str) -> Step:
    """Whether moving from the ``current`` head (None: the channel has none yet) to ``candidate`` goes
    forward in the policy's order. Only ``UPGRADE`` should move a channel by itself; ``UNKNOWN``
    (e.g. the current tag predates the policy) is for a person to decide."""
    new = policy.version(candidate)
    if new is None:
        return Step.UNKNOWN
    if current is None:
        return Step.UPGRADE
    old = policy.version(current)
    if old is None:
        return Step.UNKNOWN
    if new.key == old.key:
        return Step.SAME
    return Step.UPGRADE if new.key > old.key else Step.DOWNGRADE
