"""Choose the head of each version channel: the version its targets are pinned to next.

A channel (``tagpin.domain.channels``) follows the newest version its policy allows
(``tagpin.domain.versions``). The head is chosen before a check resolves anything, and only the
head is resolved (HEAD of its manifest), never every listed tag:

- a poll lists each repository's tags once (``TagLister.list_tags``: paginated, bounded), however
  many channels follow it, and chooses every channel's head from them;
- a push notification names its tag: the tag is checked against the channel's policy directly
  (``pushed``), nothing is listed.

The head only moves up (``tagpin.domain.versions.move``): when the newest allowed version is older
than the head (the newer one was deleted from the registry, marked bad, or the policy was edited),
the head stays and the reason is kept for ``tagpin plan``. The state store enforces the order on
every write (``Heads.move``: conditional on the head compared with), so two notifications
handled at once cannot move a head down. Only a person moves a head down (``tagpin downgrade``);
the one other way down is a rollback of the head's own version, which returns the channel to the
version before it (``Heads.roll_back``): the version its targets were rolled back to.

A version marked bad (``State.versions``: its rollout was rolled back, or a person held it back)
is never chosen again by any channel of the repository until a person clears it (``tagpin
clear``: the channel may then return to it). The marks are read only for the repositories whose
head would move, so a steady poll reads none. A tag is marked bad when ``VersionSet`` says so:
under any spelling the policy reads as the same version (``v1.4.2`` is ``1.4.2``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tagpin.domain.channels import ChannelKey, FollowedKey
from tagpin.domain.config import FollowedImage
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest, ImageRef, InvalidReference
from tagpin.domain.versions import Selection, Step, VersionPolicy, VersionSet, move, select_head
from tagpin.ports.queues import ChangeQueue
from tagpin.ports.registry import Resolver, TagLister, TagListing
from tagpin.ports.state import BadVersion, ImageEvent, PromotionStatus, State, TagState

logger = logging.getLogger(__name__)

WORKERS = 8  # repositories listed at once (each listing is sequential: page after page)


@dataclass(frozen=True)
class Head:
    """A channel's head after a check: ``tag`` is what to resolve (None: no version allowed yet)."""

    key: str
    tag: str | None
    selection: Selection | None = None  # what the policy chose from the listed tags (polls)
    kept: str | None = None  # why the head did not move to the newest allowed version
    error: str | None = None  # the tags could not be listed
    moved: bool = False  # ``tag`` is not the stored head: a move to record, whatever its digest

    @property
    def ref(self) -> ImageRef | None:
        channel = ChannelKey.parse(self.key)
        return None if channel is None or self.tag is None else channel.at(self.tag)


def decide(
    policy: VersionPolicy, current: str | None, candidate: str | None
) -> tuple[str | None, str | None]:
    """(the head, why it stayed) from the stored head and the newest allowed version."""
    if candidate is None:
        return current, (None if current is None else "no version the policy allows is listed")
    if current is None:
        return candidate, None
    step = move(policy, current, candidate)
    if step is Step.UPGRADE or step is Step.UNKNOWN:  # UNKNOWN: the head is no version of this policy
        return candidate, None
    if step is Step.SAME:
        return current, None
    return current, (
        f"the newest allowed version {candidate} is older than the head {current}: a newer one was "
        "deleted or marked bad; heads only move up (tagpin downgrade moves one down)"
    )


class Channels:
    def __init__(self, lister: TagLister, state: State, *, workers: int = WORKERS) -> None:
        self._lister = lister
        self._state = state
        self._workers = workers

    @property
    def lister(self) -> TagLister:
        return self._lister

    @property
    def state(self) -> State:
        return self._state

    def heads(
        self, channels: Iterable[FollowedImage], stored: Mapping[FollowedKey, TagState] | None = None
    ) -> dict[FollowedKey, Head]:
        """Every channel's head, from one listing per repository. ``stored``: the channels' tag
        states when already read (else they are read here, in batches)."""
        wanted = [
            (c, key, c.policy)
            for c in channels
            if (key := c.channel_key) is not None and c.policy is not None
        ]
        if not wanted:
            return {}
        repositories = {str(key.repository): key.repository for _c, key, _p in wanted}
        listings = self._list(list(repositories.values()))
        if stored is None:
            stored = self._state.tags.get_many([c.image for c, _k, _p in wanted])
        heads: dict[FollowedKey, Head] = {}
        moving: list[tuple[FollowedImage, str, VersionPolicy]] = []
        for channel, key, policy in wanted:
            listing = listings[str(key.repository)]
            known = stored.get(channel.image)
            current = None if known is None else known.version
            if isinstance(listing, Exception):
                heads[channel.image] = Head(
                    channel.image, current, error=f"{type(listing).__name__}: {listing}"
                )
                continue
            selection = select_head(policy, listing.tags)
            head, kept = decide(policy, current, selection.head_tag)
            heads[channel.image] = Head(channel.image, head, selection, kept, moved=head != current)
            if head != current:
                moving.append((channel, str(key.repository), policy))
        if moving:  # a head would move: choose again without the versions marked bad
            bad = self._state.versions.bad([repository for _c, repository, _p in moving])
            for channel, repository, policy in moving:
                if not (marked := bad.get(repository)):
                    continue
                listing = listings[repository]
                assert not isinstance(listing, Exception)
                selection = select_head(policy, listing.tags, bad=list(marked))
                current = None if (known := stored.get(channel.image)) is None else known.version
                head, kept = decide(policy, current, selection.head_tag)
                heads[channel.image] = Head(channel.image, head, selection, kept, moved=head != current)
        return heads

    def pushed(self, channel: FollowedImage, tag: str) -> Head | None:
        """The head after a push of ``tag`` (a notification names it: nothing is listed), or None
        when the push does not move the channel (not a version the policy allows, marked bad, or
        not newer than the head)."""
        key, policy = channel.channel_key, channel.policy
        if key is None or policy is None:
            return None
        version = policy.version(tag)
        if version is None or policy.screen(version) is not None:
            return None
        stored = self._state.tags.get(channel.image)
        current = None if stored is None else stored.version
        if current is not None and move(policy, current, tag) is not Step.UPGRADE:
            return None
        bad = self._state.versions.bad([str(key.repository)]).get(str(key.repository), {})
        if tag in VersionSet(policy, bad):
            return None
        return Head(channel.image, tag)

    def mark_bad(self, key: str, version: BadVersion) -> None:
        """A channel's version failed (or a person held it back): no channel of its repository
        chooses it again until a person clears it."""
        channel = ChannelKey.parse(key)
        if channel is not None:
            self._state.versions.mark_bad(str(channel.repository), version)

    def _list(self, repositories: list[ImageRef]) -> dict[str, TagListing | Exception]:
        def one(repository: ImageRef) -> TagListing | Exception:
            try:
                listing = self._lister.list_tags(repository)
            except Exception as exc:  # one registry's failure must not stop the others
                logger.warning(
                    "listing tags failed", extra={"repository": str(repository), "error": repr(exc)}
                )
                return exc
            if listing.truncated:
                logger.warning(
                    "tag listing cut short; choosing from what was listed",
                    extra={"repository": str(repository), "end": listing.end, "tags": len(listing.tags)},
                )
            return listing

        if len(repositories) == 1:
            return {str(repositories[0]): one(repositories[0])}
        with ThreadPoolExecutor(max_workers=min(self._workers, len(repositories))) as pool:
            return dict(zip((str(r) for r in repositories), pool.map(one, repositories), strict=True))


def mark_failed(state: State, image: FollowedKey, digest: Digest, why: str, now: int) -> str | None:
    """A channel's rollout of ``digest`` failed: its version is marked bad for the repository (no
    channel of it chooses the version again until a person clears it). The version, or None
    (``image`` is no channel, or the version is not known)."""
    channel = ChannelKey.parse(image)
    if channel is None:
        return None
    promotion = state.promotions.get(image)
    stored = state.tags.get(image)
    version = promotion.tag if promotion is not None and promotion.digest == digest else None
    if version is None and stored is not None and stored.digest == digest:
        version = stored.version
    if version is not None:
        state.versions.mark_bad(str(channel.repository), BadVersion(version, digest, why, now))
    return version


def return_to_previous(state: State, followed: FollowedImage | None, digest: Digest, now: int) -> str | None:
    """The targets of a channel whose head's rollout (``digest``) failed were rolled back: the head
    returns to the version before it, the one they were rolled back to (docs/policies.md), unless
    that one is marked bad too (a person held it back): the head then stays, blocked. Called after
    ``mark_failed``: the failed version's mark is written first, so no check moves back up to it.
    The version returned to, or None (``followed`` is no channel, or no longer followed)."""
    if followed is None or followed.policy is None or followed.channel_key is None:
        return None
    back = state.heads.roll_back(followed.image, digest, now, followed.policy)
    return None if back is None else back.version


def marked_previous(state: State, followed: FollowedImage | None) -> Callable[[str | None], str | None]:
    """For a rollback of a channel's targets: why the image a target ran before must not go back
    on (a version of the channel's repository marked bad: a person held it back with ``tagpin
    downgrade``, or its own rollout failed; until a person clears it), or None. The marks are read
    once, here (``followed`` is no channel: nothing is read, nothing refused)."""
    if followed is None or followed.policy is None or (key := followed.channel_key) is None:
        return lambda _image: None
    repository, policy = key.repository, followed.policy
    marked = state.versions.bad([str(repository)]).get(str(repository), {})

    def why(image: str | None) -> str | None:
        try:
            ref = None if not image or not marked else ImageRef.parse(image)
        except InvalidReference:
            return None
        if ref is None or ref.tag is None or ref.name != repository.name:
            return None
        bad = next((b for b in marked.values() if ref.tag in VersionSet(policy, [b.tag])), None)
        return None if bad is None else f"{ref.tag} is marked bad ({bad.reason})"

    return why


@dataclass(frozen=True)
class Downgrade:
    """What ``Channels.downgrade`` did."""

    key: str
    tag: str
    digest: Digest
    held_back: tuple[str, ...]  # the newer allowed versions marked bad, so no check moves back up


class Downgrades:
    """A person moves a channel's head down (the only way a head goes down): the newer allowed
    versions are marked bad (so no check moves the head back up; ``tagpin clear`` releases one),
    the head is recorded at the chosen version (a newer observation than any before), and a change
    is enqueued: the targets roll to it through the waves like any change. Recorded in the
    channel's audit trail with who asked."""

    def __init__(
        self, channels: Channels, resolver: Resolver, queue: ChangeQueue, clock: Callable[[], int]
    ) -> None:
        self._channels = channels
        self._resolver = resolver
        self._queue = queue
        self._clock = clock

    def downgrade(self, followed: FollowedImage, tag: str, who: str) -> Downgrade:
        key, policy = followed.channel_key, followed.policy
        if key is None or policy is None:
            raise ValueError(f"{followed.image} is not a version channel")
        version = policy.version(tag)
        if version is None or (reason := policy.screen(version)) is not None:
            why = "not a version" if version is None else reason
            raise ValueError(f"{tag!r} is not a version {followed.image} may run ({why})")
        state = self._channels.state
        repository = str(key.repository)
        listing = self._channels.lister.list_tags(key.repository)
        # Every newer version the policy allows (one it does not allow is never chosen by this
        # channel, and may be another channel's: it is left alone), unless marked bad already.
        marked = VersionSet(policy, state.versions.bad([repository]).get(repository, {}))
        newer = sorted(
            (
                v
                for t in listing.tags
                if (v := policy.version(t)) is not None
                and v.key > version.key
                and policy.screen(v) is None
                and v.tag not in marked
            ),
            key=lambda v: v.rank,
        )
        held_back = tuple(v.tag for v in newer)
        resolution = self._resolver.resolve(key.at(tag))
        digest = Digest(resolution.digest)
        now = self._clock()
        why = f"held back: {followed.image} downgraded to {tag} by {who}"
        for newer_tag in held_back:
            state.versions.mark_bad(repository, BadVersion(newer_tag, "", why, now))
        # The newer versions are marked first: a check in flight cannot move the head back up.
        record = state.heads.move(followed.image, digest, now, Trigger.MANUAL, tag, policy, down=True)
        now = record.current.observed_at  # newer than every observation before (the head's order)
        state.history.image_event(
            followed.image,
            digest,
            ImageEvent.DOWNGRADED,
            now,
            detail=f"to {tag} by {who}; held back: {', '.join(held_back) or 'nothing'}",
            trigger=Trigger.MANUAL,
        )
        # changed_at: the head moved back to this digest now, a new move (not a repeat of the
        # earlier one, which the idempotency records would answer from their cache).
        self._queue.send(
            Change(
                move=Move(
                    image=followed.image,
                    digest=digest,
                    observed_at=now,
                    changed_at=now,
                    trigger=Trigger.MANUAL,
                    tag=tag,
                ),
            )
        )
        return Downgrade(followed.image, tag, digest, held_back)

    def clear(
        self, followed: FollowedImage, tag: str, who: str, siblings: Iterable[FollowedImage] = ()
    ) -> bool:
        """Forget that ``tag`` (any spelling of its version) is bad: the channels of its repository
        (``followed`` and the other ``siblings`` of the same repository) may choose it again. A
        channel whose head stayed at ``tag``, blocked (its rollout failed with nothing to return
        to, or a person rejected it), may roll it again: its head and its halted promotion are
        cleared too."""
        key, policy = followed.channel_key, followed.policy
        if key is None or policy is None:
            raise ValueError(f"{followed.image} is not a version channel")
        state = self._channels.state
        repository = str(key.repository)
        spellings = VersionSet(policy, [tag])
        marked = {tag} | {t for t in state.versions.bad([repository]).get(repository, {}) if t in spellings}
        cleared = False
        for spelt in sorted(marked):
            cleared = state.versions.clear(repository, spelt) or cleared
        for channel in {followed.image: followed, **{s.image: s for s in siblings}}.values():
            other, its_policy = channel.channel_key, channel.policy
            if other is None or its_policy is None or other.repository != key.repository:
                continue
            cleared = state.heads.clear(channel.image, tag, its_policy) or cleared
            promotion = state.promotions.get(channel.image)
            if (
                promotion is not None
                and promotion.status is PromotionStatus.HALTED
                and promotion.tag in VersionSet(its_policy, [tag])
            ):
                cleared = state.promotions.clear(channel.image, promotion.digest) or cleared
        if cleared:
            self._channels.state.history.image_event(
                followed.image, "", ImageEvent.CLEARED, self._clock(), detail=f"{tag} cleared by {who}"
            )
        return cleared
