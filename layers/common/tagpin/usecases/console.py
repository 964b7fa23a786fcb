"""The console's views: what ``tagpin status`` and ``tagpin history`` show, for a person in
a browser, paged so that 10,000 targets cost one page's reads; and what a person does there (approve,
reject, hold, release, redrive) through the same use cases as the CLI (``Approvals``, ``Holds``,
``DeadLetterQueue``).

``tagpin.console`` serves these over the HTTP API and renders them (``tagpin.adapters.web``); nothing
here knows about HTTP or HTML. Every string in these values may come from a registry, a cluster or a
notification: the renderer escapes them all.

Pages are keyset pages, not offsets: the configuration's targets first (in its order), then the
label-discovered ones shard by shard in key order (image, then target id). A page of targets reads
the configuration (cached), one Query per shard it touches (usually one; of each entry its tag and
target id), and one batched read of its targets' states and of its tags' (only what a row shows:
``Targets.shown``, ``Tags.shown``), whatever the number of targets followed. A page of images
reads each shard's one item of tags and target counts (a few shards a batched read) and its tags'
states, never the index's entries. A target is looked up by key (``Followed.of_target``): its
index entry's key when its image is known, else one Query of the index by target id.

The actions a person takes there are in ``tagpin.usecases.console_actions``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage, TagpinConfig, Target
from tagpin.domain.shards import all_shards, shard
from tagpin.domain.versions import VersionPolicy
from tagpin.ports.state import (
    PromotionStatus,
    State,
    TagState,
    TargetState,
)
from tagpin.usecases.admission import Admission
from tagpin.usecases.approvals import Approvals
from tagpin.usecases.console_explain import admission_view
from tagpin.usecases.console_views import (
    ImageRow,
    ImageView,
    Page,
    PendingApproval,
    PromotionView,
    TargetRow,
    TargetView,
    WaveView,
    event_of,
    target_row,
)
from tagpin.usecases.deadletters import DeadLetterQueue, Look
from tagpin.usecases.detect import now_ms
from tagpin.usecases.followed import Followed, discovered_policy, merge
from tagpin.usecases.holds import Holds
from tagpin.usecases.waves import plan

PAGE_SIZE = 100
TIMELINE = 100  # history items shown on an image's or a target's page
MAX_CURSOR = 2048
APPROVALS_SHOWN = 200  # pending approvals the overview lists
HOLDS_SHOWN = 1000  # held targets the holds view lists
CONFIGURATION, LABEL = "configuration", "label"


_SHARD = re.compile(r"^[0-9a-f]{2}$")


def _parse_cursor(cursor: str | None) -> tuple[str, int, str | None]:
    """("c", position, None) in the configuration, or ("i", shard number, sort key or None)."""
    if not cursor:
        return "c", 0, None
    if len(cursor) > MAX_CURSOR:
        raise ValueError("the page cursor is too long")
    if cursor[0] == "c" and cursor[1:].isdigit():
        return "c", int(cursor[1:]), None
    name, sep, after = cursor[1:].partition(":")
    if cursor[0] == "i" and sep and _SHARD.match(name) and name in all_shards():
        return "i", int(name, 16), after or None
    raise ValueError("not a page cursor")


# -- the console ----------------------------------------------------------------------------------


class Console:
    def __init__(
        self,
        *,
        config: Callable[[], TagpinConfig],
        state: State,
        followed: Callable[[], Followed],
        holds: Callable[[], Holds],
        dead_letters: Callable[[], DeadLetterQueue],
        approvals: Callable[[], Approvals],
        clock: Callable[[], int] = now_ms,
        admission: Callable[[], Admission] | None = None,
    ) -> None:
        self.clock = clock
        self._config = config
        self.state = state
        self._followed = followed
        self.holds = holds
        self.dead_letters = dead_letters
        self.approvals = approvals
        self._admission = admission

    # -- approvals -----------------------------------------------------------------------------
    def pending_approvals(self) -> list[PendingApproval]:
        """The waves waiting for a person now, configured or label-discovered images alike: read
        from the promotions' hints (at most ``APPROVALS_SHOWN``), never every promotion."""
        approvals = self.approvals()
        return [
            PendingApproval(
                image=promotion.image,
                digest=promotion.digest,
                wave=approvals.wave_name(promotion.awaiting_wave),
                version=promotion.tag,
                since=promotion.updated_at,
                expires_at=promotion.approval_expires_at,
            )
            for promotion in self.state.promotions.awaiting(APPROVALS_SHOWN, self.clock())
            if promotion.awaiting_wave is not None
        ]

    # -- images --------------------------------------------------------------------------------
    def images(self, cursor: str | None = None, size: int = PAGE_SIZE) -> Page[ImageRow]:
        """Followed images, ``size`` a page: the configuration's, then the discovered ones shard by
        shard in name order, from each shard's one item of tags and target counts (``Index.images``):
        a page reads a few such items and its tags' states, never the index's entries."""
        config = self._config()
        kind, position, after = _parse_cursor(cursor)
        configured = [f.image for f in config.images]
        keys: list[FollowedKey] = []
        next_cursor: str | None = None
        if kind == "c":
            keys = configured[position : position + size]
            if position + size < len(configured):
                next_cursor = f"c{position + size}"
            position, after = 0, None
        listed = self._configured_images(config, keys)
        if next_cursor is None:
            next_cursor = self._discovered_images(config, position, after, size - len(listed), listed)
        tags = self.state.tags.get_many([i.image for i in listed])
        return Page([_image_row(i, tags.get(i.image)) for i in listed], next_cursor, not cursor)

    def _configured_images(self, config: TagpinConfig, keys: list[FollowedKey]) -> list[_Listed]:
        """The configuration's ``keys`` with their targets: the configured ones, and those found by
        label too, read by the prefix of their index keys, only for the images their shard's item
        says have some (most configured images have none)."""
        shards = self.state.index.images(sorted({shard(image) for image in keys})) if keys else {}
        followed, by_image = self._followed(), config.followed
        listed = []
        for image in keys:
            configured = by_image[image]
            found = followed.get(image) if shards.get(shard(image), {}).get(image) else configured
            found = found or configured
            listed.append(_Listed(image, found.policy, len(found.targets), CONFIGURATION))
        return listed

    def _discovered_images(
        self, config: TagpinConfig, number: int, after: str | None, size: int, listed: list[_Listed]
    ) -> str | None:
        """Add up to ``size`` discovered images to ``listed``, from shard ``number`` after the image
        ``after``, reading the shards' items a few at a time (2, then 4, 8...); the cursor to go on
        from, None when no image is left."""
        shards = all_shards()
        configured, clusters = {f.image for f in config.images}, set(config.clusters)
        batch, taken = 2, 0
        last = f"i{shards[number]}:{after or ''}" if number < len(shards) else ""  # where this page began
        while number < len(shards):
            chunk = shards[number : number + batch]
            images = self.state.index.images(chunk)
            for shard_name in chunk:
                for image, per_cluster in sorted(images.get(shard_name, {}).items()):
                    if (after is not None and image <= after) or image in configured:
                        continue
                    targets = sum(n for cluster, n in per_cluster.items() if cluster in clusters)
                    if not targets:  # only in clusters no longer configured
                        continue
                    try:
                        policy = discovered_policy(image)
                    except ValueError:  # left out, as ``merge`` leaves it out
                        continue
                    if taken == size:  # one more than the page holds: the next page starts after it
                        return last
                    listed.append(_Listed(image, policy, targets, LABEL))
                    taken, last = taken + 1, f"i{shard_name}:{image}"
                after = None
            number, batch = number + len(chunk), batch * 2
        return None

    def image(self, image: FollowedKey) -> ImageView:
        followed = self._followed().get(image)
        if followed is None:
            raise LookupError(f"{image!r} is not a followed image")
        configured = {f.image for f in self._config().images}
        tag = self.state.tags.get(image)
        source = CONFIGURATION if image in configured else LABEL
        row = _image_row(_Listed(image, followed.policy, len(followed.targets), source), tag)
        targets = self._rows([(followed, t) for t in followed.targets], {image: tag} if tag else {})
        timeline = [event_of(e, e.event) for e in self.state.history.of_image(image, limit=TIMELINE)]
        return ImageView(row, targets, timeline, self._promotion(followed))

    def _promotion(self, followed: FollowedImage) -> PromotionView | None:
        """The image's current promotion, wave by wave, with the soak timer of the active one."""
        promotion = self.state.promotions.get(followed.image)
        if promotion is None:
            return None
        settings = self._config().rollout
        waves = []
        for wave in plan(settings, list(followed.targets)):
            soak_ends_at = None
            if promotion.status is PromotionStatus.COMPLETE or wave.index < promotion.wave:
                stage = "done"
            elif promotion.status is PromotionStatus.HALTED:
                stage = "halted" if wave.index == promotion.wave else "waiting"
            elif promotion.status is PromotionStatus.DRY_RUN:
                stage = "dry-run"
            elif wave.index > promotion.wave:
                stage = "waiting"
            elif promotion.awaiting_wave == wave.index:
                stage = "awaiting-approval"
            elif promotion.wave_verified_at is not None:
                stage = "soaking"
                soak_ends_at = promotion.wave_verified_at + settings.soak_after(wave.wave) * 1000
            else:
                stage = "rolling"
            waves.append(WaveView(wave.name, len(wave.targets), stage, soak_ends_at))
        return PromotionView(
            promotion.digest,
            promotion.status.value,
            promotion.tag,
            promotion.started_at,
            waves,
            promotion.detail,
        )

    # -- targets -------------------------------------------------------------------------------
    def targets(self, cursor: str | None = None, size: int = PAGE_SIZE) -> Page[TargetRow]:
        """Followed targets, ``size`` a page, with their tag's digest and their own state."""
        config = self._config()
        kind, position, after = _parse_cursor(cursor)
        picked: list[tuple[FollowedImage, Target]] = []
        next_cursor: str | None = None
        configured = [(f, t) for f in config.images for t in f.targets]
        if kind == "c":
            picked = configured[position : position + size]
            if position + size < len(configured):
                next_cursor = f"c{position + size}"
            else:
                kind, position, after = "i", 0, None
        if kind == "i":
            next_cursor = self._discovered(
                config, {t.id for _, t in configured}, position, after, size, picked
            )
        return Page(self._rows(picked), next_cursor, not cursor)

    def _discovered(
        self,
        config: TagpinConfig,
        configured: set[str],
        number: int,
        after: str | None,
        size: int,
        picked: list[tuple[FollowedImage, Target]],
    ) -> str | None:
        """Add discovered targets to ``picked`` from shard ``number`` after ``after`` until the page
        is full; the cursor to go on from (None: no more)."""
        known = set(config.clusters)
        shards = all_shards()
        while number < len(shards):
            entries, last = self.state.index.page(shards[number], max(1, size - len(picked)), after)
            for i, entry in enumerate(entries):
                after = f"{entry.image}#{entry.target_id}"
                if entry.target_id not in configured:
                    merged = merge(entry.image, config.followed.get(entry.image), [entry], known)
                    found = [t for t in merged.targets if t.id == entry.target_id] if merged else []
                    if merged is not None and found:
                        picked.append((merged, found[0]))
                if len(picked) >= size:
                    at_end = i == len(entries) - 1 and last is None and number == len(shards) - 1
                    return None if at_end else f"i{shards[number]}:{after}"
            if last is None:
                number, after = number + 1, None
            else:
                after = last
        return None

    def _rows(
        self,
        picked: list[tuple[FollowedImage, Target]],
        tags: Mapping[FollowedKey, TagState] | None = None,
        states: Mapping[str, TargetState] | None = None,
    ) -> list[TargetRow]:
        configured = {t.id for f in self._config().images for t in f.targets}
        if states is None:  # only what a row shows: every attribute read is sent and parsed
            states = self.state.targets.shown([t.id for _, t in picked])
        if tags is None:
            tags = self.state.tags.shown(list(dict.fromkeys(f.image for f, _ in picked)))
        return [
            target_row(
                f, t, states.get(t.id), tags.get(f.image), CONFIGURATION if t.id in configured else LABEL
            )
            for f, t in picked
        ]

    def target(self, target_id: str, image: FollowedKey | None = None) -> TargetView:
        """A target and its timeline, looked up by key (``Followed.of_target``): with ``image``
        one read of its index entry, without one Query of the index by target id."""
        followed = self._followed().of_target(target_id, image)
        if followed is None:
            raise LookupError(f"{target_id!r} is not a followed target")
        tag = self.state.tags.get(followed.image)
        target = next(t for t in followed.targets if t.id == target_id)
        states = self.state.targets.get_many([target_id])
        (row,) = self._rows([(followed, target)], {followed.image: tag} if tag else {}, states)
        timeline = [event_of(e, e.status) for e in self.state.history.of_target(target_id, limit=TIMELINE)]
        if self._admission is None:  # (would the tag's digest start there now, and if not, why)
            return TargetView(row, timeline)
        rollout, now = self._config().rollout, self.clock()
        explained = admission_view(self._admission(), self.state, rollout, followed, target, tag, states, now)
        return TargetView(row, timeline, explained)

    # -- holds, dead letters -------------------------------------------------------------------
    def held(self) -> list[TargetRow]:
        """The held targets with their reasons (at most ``HOLDS_SHOWN``): read from the holds'
        hints and those targets' states, never every target; each target's index entry read by
        its key (the image its state records), all at once. A held target no longer followed (its
        workload deleted since) is left out."""
        states = self.state.targets.held(HOLDS_SHOWN, self.clock())
        config = self._config()
        configured = {t.id: f for f in config.images for t in f.targets}
        keys = [(s.image, s.target_id) for s in states if s.image and s.target_id not in configured]
        entries = {e.target_id: e for e in self.state.index.get_many(keys)} if keys else {}
        known = set(config.clusters)
        rows: list[tuple[FollowedImage, Target]] = []
        for state in states:
            followed = configured.get(state.target_id)
            if followed is None and (entry := entries.get(state.target_id)) is not None:
                followed = merge(entry.image, config.followed.get(entry.image), [entry], known)
            if followed is None:  # held before tagpin applied anything there: no image recorded
                followed = self._followed().of_target(state.target_id)
            target = (
                next((t for t in followed.targets if t.id == state.target_id), None) if followed else None
            )
            if followed is not None and target is not None:
                rows.append((followed, target))
        return self._rows(rows, states={s.target_id: s for s in states}) if rows else []

    def dead_letter_view(self) -> Look:
        return self.dead_letters().look()


@dataclass(frozen=True)
class _Listed:
    """An image as a page of images lists it: its policy and how many targets it has."""

    image: FollowedKey
    policy: VersionPolicy | None
    targets: int
    source: str


def _image_row(listed: _Listed, tag: TagState | None) -> ImageRow:
    return ImageRow(
        image=listed.image,
        source=listed.source,
        targets=listed.targets,
        policy=listed.policy.text if listed.policy is not None else None,
        version=tag.version if tag is not None and listed.policy is not None else None,
        digest=tag.digest if tag else None,
        resolved_at=tag.resolved_at if tag else None,
        changed_at=tag.changed_at if tag else None,
        error=tag.last_error if tag else None,
        error_at=tag.error_at if tag else None,
        blocked=tag.bad_reason if tag is not None and tag.blocked else None,
    )


@dataclass(frozen=True)
class Overview:
    """The console's first page: the first images, and what waits for a person."""

    images: Page[ImageRow]
    approvals: list[PendingApproval] = field(default_factory=list)


OVERVIEW_IMAGES = 25  # images on the overview (the images page has them all, PAGE_SIZE a page)


def overview(console: Console) -> Overview:
    return Overview(console.images(size=OVERVIEW_IMAGES), console.pending_approvals())
