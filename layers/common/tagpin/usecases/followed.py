"""What tagpin follows: the configuration's explicit targets merged with the label-discovered ones.

The reconciler writes the index of followed tag -> targets found by label in the clusters
(``State.index_entries``); the configuration lists targets for workloads that cannot be
labelled. ``Followed`` is the one view of both that the poller, the webhook and the consumer read,
so a newly labelled workload is followed without a redeploy or a configuration change.

It is lazy: ``followed.get(image)`` costs one Query for that tag (the webhook, the consumer);
``followed.of_target(target_id)`` the image a target runs, by key (the console, ``tagpin hold``);
iterating loads the whole index once (the poller).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial

from tagpin.domain.channels import SEPARATOR, ChannelKey, FollowedKey, repository_part
from tagpin.domain.config import FollowedImage, Kind, TagpinConfig, Target
from tagpin.domain.refs import ImageRef
from tagpin.domain.shards import WHOLE, PollPart, shard
from tagpin.domain.versions import VersionPolicy
from tagpin.ports.state import IndexEntry, State
from tagpin.usecases import overlap

logger = logging.getLogger(__name__)

SELECT_ONE_BY_ONE = 4  # up to this many tags are looked up one by one (a Query each)


def entry_target(entry: IndexEntry) -> Target | None:
    try:
        return Target(
            cluster=entry.cluster,
            namespace=entry.namespace,
            kind=Kind(entry.kind),
            name=entry.name,
            container=entry.container,
        )
    except ValueError as exc:  # pydantic.ValidationError is one
        logger.warning(
            "ignoring an unusable index entry", extra={"target": entry.target_id, "error": str(exc)}
        )
        return None


def merge(
    image: FollowedKey, configured: FollowedImage | None, entries: list[IndexEntry], known: set[str]
) -> FollowedImage | None:
    """The configured targets first, then indexed ones not already listed (dedup by target id).
    Entries of clusters no longer in the configuration are left out."""
    targets: dict[str, Target] = {t.id: t for t in (configured.targets if configured else [])}
    for entry in entries:
        if entry.cluster not in known or entry.target_id in targets:
            continue
        target = entry_target(entry)
        if target is not None and target.id == entry.target_id:
            targets[target.id] = target
    if not targets:
        return None
    if configured is not None:  # its policy and channel name
        return configured.model_copy(update={"targets": list(targets.values())})
    try:
        return FollowedImage(image=image, targets=list(targets.values()))
    except ValueError as exc:  # a configured channel's entries, the channel since removed
        logger.warning(
            "ignoring index entries of an unknown channel", extra={"image": image, "error": str(exc)}
        )
        return None


def discovered_policy(image: FollowedKey) -> VersionPolicy | None:
    """The version policy of a label-discovered image (its channel key names it), None for a tag;
    ``ValueError`` for a key ``merge`` leaves out (a configured channel's name, the channel since
    removed; a policy that chooses nothing; not a reference): what ``FollowedImage`` decides,
    without building its targets (the console lists images with their target counts only)."""
    key = ChannelKey.parse(image)
    if key is None:
        ImageRef.parse(image)
        return None
    if key.named:
        raise ValueError(f"{image!r}: channel {key.name!r} is not in the configuration")
    policy = VersionPolicy.parse(key.name)
    if not policy.chooses:
        raise ValueError(f"{image!r}: a channel needs a version policy, not {policy.kind}")
    return policy


class Followed(Mapping[FollowedKey, FollowedImage]):
    """Followed images by canonical tagged reference (configuration + index)."""

    def __init__(self, config: TagpinConfig, state: State, part: PollPart = WHOLE) -> None:
        """``part``: iterating yields only the tags of that part of a poll (its shards)."""
        self._config = config
        self._state = state
        self._part = part
        self._all: dict[FollowedKey, FollowedImage] | None = None

    def _merged(
        self, entries: list[IndexEntry], configured: list[FollowedKey]
    ) -> dict[FollowedKey, FollowedImage]:
        by_image: dict[FollowedKey, list[IndexEntry]] = {}
        for entry in entries:
            by_image.setdefault(entry.image, []).append(entry)
        known = set(self._config.clusters)
        merged: dict[FollowedKey, FollowedImage] = {}
        for image in dict.fromkeys([*configured, *by_image]):
            followed = merge(image, self._config.followed.get(image), by_image.get(image, []), known)
            if followed is not None:
                merged[image] = followed
        return merged

    def _load(self) -> dict[FollowedKey, FollowedImage]:
        if self._all is None:
            shards = None if self._part.whole else self._part.shards
            configured = [i for i in self._config.followed if self._part.covers(i)]
            self._all = self._merged(self._state.index.entries(shards=shards), configured)
        return self._all

    def select(self, images: Iterable[FollowedKey]) -> dict[FollowedKey, FollowedImage]:
        """The followed ones among ``images`` in one lookup's worth of work (``lookup``)."""
        return self.lookup(images, [])[0]

    def channels(self, repositories: Iterable[str]) -> dict[str, list[FollowedImage]]:
        """The version channels of each of ``repositories`` (``lookup``)."""
        return self.lookup([], repositories)[1]

    def lookup(
        self, images: Iterable[FollowedKey], repositories: Iterable[str]
    ) -> tuple[dict[FollowedKey, FollowedImage], dict[str, list[FollowedImage]]]:
        """The followed ones among ``images`` (tags), and the version channels of each of
        ``repositories`` (``registry/repository``; configured, and discovered by annotation), in
        one lookup's worth of work: one Query per tag or repository while there are a few (side by side), else
        one Query per shard they fall in (at most ``SHARDS``, side by side), whatever the count."""
        wanted = list(dict.fromkeys(images))
        repos = list(dict.fromkeys(repositories))
        if self._all is None and len(wanted) + len(repos) > SELECT_ONE_BY_ONE:
            shards = sorted({shard(image) for image in wanted} | {shard(r) for r in repos})
            entries = self._state.index.entries(shards=shards)
            prefixes = tuple(r + SEPARATOR for r in repos)
            keys = list(wanted)
            if prefixes:
                keys += [i for i in self._config.followed if i.startswith(prefixes)]
                keys += [e.image for e in entries if e.image.startswith(prefixes)]
            found = self._merged(entries, keys)
            tags = {image: found[image] for image in wanted if image in found}
            return tags, self._by_repository(found.values(), repos)
        # The few Queries at once (the webhook: the pushed tag's and its repository's channels').
        calls: list[Callable[[], FollowedImage | list[FollowedImage] | None]] = [
            *(partial(self.get, image) for image in wanted),
            *(partial(self._channels_of, r) for r in repos),
        ]
        answers = overlap.all_of(calls)
        tags = {image: f for image, f in zip(wanted, answers, strict=False) if isinstance(f, FollowedImage)}
        channels = {
            r: c for r, c in zip(repos, answers[len(wanted) :], strict=True) if isinstance(c, list) and c
        }
        return tags, channels

    def of_target(self, target_id: str, image: FollowedKey | None = None) -> FollowedImage | None:
        """The followed image ``target_id`` runs (with that target among its targets), by key,
        never by reading the index: the configuration's targets, else the target's own index
        entry (with ``image``: one read of its key; without, or when it is not there: one Query of
        the index by target id). A discovered target's image carries that one discovered target."""
        configured = [f for f in self._config.images if any(t.id == target_id for t in f.targets)]
        if configured:
            return next((f for f in configured if f.image == image), configured[0])
        known = set(self._config.clusters)
        entries = self._state.index.get_many([(image, target_id)]) if image else []
        for entry in entries or self._state.index.of_target(target_id):
            merged = merge(entry.image, self._config.followed.get(entry.image), [entry], known)
            if merged is not None and any(t.id == target_id for t in merged.targets):
                return merged
        return None

    @staticmethod
    def _by_repository(
        followed: Iterable[FollowedImage], repositories: list[str]
    ) -> dict[str, list[FollowedImage]]:
        found: dict[str, list[FollowedImage]] = {}
        wanted = set(repositories)
        for f in followed:
            if f.policy is not None and (repository := repository_part(f.image)) in wanted:
                found.setdefault(repository, []).append(f)
        return found

    def _channels_of(self, repository: str) -> list[FollowedImage]:
        prefix = repository + SEPARATOR
        if self._all is not None:
            return [f for image, f in self._all.items() if image.startswith(prefix) and f.policy is not None]
        by_image: dict[FollowedKey, list[IndexEntry]] = {}
        for entry in self._state.index.channel_entries(repository):
            by_image.setdefault(entry.image, []).append(entry)
        configured = [image for image in self._config.followed if image.startswith(prefix)]
        known = set(self._config.clusters)
        merged = (
            merge(image, self._config.followed.get(image), by_image.get(image, []), known)
            for image in dict.fromkeys([*configured, *by_image])
        )
        return [f for f in merged if f is not None]

    def __getitem__(self, image: FollowedKey) -> FollowedImage:
        if self._all is not None:
            return self._all[image]
        followed = merge(
            image,
            self._config.followed.get(image),
            self._state.index.entries(image),
            set(self._config.clusters),
        )
        if followed is None:
            raise KeyError(image)
        return followed

    def __iter__(self) -> Iterator[FollowedKey]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())
