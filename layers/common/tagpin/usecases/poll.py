"""The scheduled poll: every followed tag resolved once, cheaply, within the Lambda time budget.

- Each distinct tag is resolved once per run, however many listings and targets share it.
- Tags are resolved concurrently in chunks by the registry client (its global and per-registry
  bounds, retries and circuit breakers apply); ``AHEAD`` chunks resolve at once, so that the
  registry never waits for a chunk's results to be recorded (nor, at the start, for the settled
  digests): the next chunk's requests are queued in the bounds. The deadline bounds every
  resolution; no chunk starts after it, and a chunk started before it is recorded.
- State is read in batches of 100 keys (BatchGetItem's limit), several at a time on a small
  thread pool, started while the chunk before is recorded (its own resolution is running by
  then): the reads do not depend on the answers, so they overlap the registry round trips
  instead of following them. A tag whose
  digest is unchanged and whose targets all run it costs no write. Anything else goes through
  ``Detector.observe`` (conditional write, enqueue when a target is behind), and errors are
  recorded on each tag of the failing registry.
- When the remaining time runs short the poll stops starting new work, persists the first tag
  it did not finish as the cursor, and the next run starts there: no tag is starved. The cursor is
  written only when it moves. A poller that ran before starts where it left it, without waiting:
  its read confirms it while the first chunks resolve (moved by another run: they are dropped).
- The settled digests (``State.digests``: every shard's tags in one compact item) are read once
  per run: a tag the registry answers with its settled digest costs no read of its own items at
  all. Only the other tags (moved, first seen, erring, targets not settled yet) have their tag
  and target items read as above; a tag found unchanged with every target settled is added to
  the settled digests (all of a run's together at its end, a few writes per shard:
  ``Digests.settle_many``), a tag the registry failed to answer for is dropped from them.
- A poll can be split in parts (``PollPart``: fixed sets of shards), each run by its own
  invocation with its own cursor and time budget; the scheduled invocation then only starts the
  parts (``functions/poller``). One part reads only its shards' index partitions and items.
- Optionally (per registry, ``ignore_attestation_changes``) an index whose only change is in
  its attestation manifests (BuildKit provenance, platform ``unknown/unknown``) is not a change.
- A version channel (``tagpin.domain.channels``) is resolved at its head, chosen first from one
  listing of its repository's tags (``tagpin.usecases.channels``); from there on it is a tag like
  any other. A channel whose tags cannot be listed keeps its head and counts as an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import FollowedImage, Registry
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import Observation, TagOutcome
from tagpin.domain.poll_pass import PollPass
from tagpin.domain.refs import Digest, ImageRef
from tagpin.domain.shards import WHOLE, PollPart, shard
from tagpin.ports.registry import BatchResolver, RegistryError, Resolution
from tagpin.ports.state import State, TagState, TargetState
from tagpin.usecases.attestations import AttestationFilter
from tagpin.usecases.detect import Detector, merge_followed, now_ms
from tagpin.usecases.poll_refs import PollRefs
from tagpin.usecases.poll_summary import PollSummary, guarded

if TYPE_CHECKING:
    from tagpin.usecases.channels import Channels

logger = logging.getLogger(__name__)

BATCH_KEYS = 100  # BatchGetItem: at most 100 keys per call
AHEAD = 2  # chunks resolving at once: the next one's requests wait in the registry's bounds
# Chunks that may resolve before the settled digests are read: 4,000 tags, about 3 s of answers
# from the local registry on 2 shared cores. At 10,000 tags that read is one BatchGetItem of 64
# items of about 20 KB that cost moto 1.7 s of CPU beside the registry (2-3 s of wall time) in the
# map layout; about 0.7 s in the one-string layout (``digests.py``): with 8 chunks the registry
# could run out of work before the read was done. Bounded, since every chunk started is recorded,
# deadline or not.
WHILE_READING = 16


def _cancel(started: list[Future[Any]]) -> None:
    """Drop the chunks started: their answers so far, and their requests not sent yet."""
    for f in started:
        f.cancel()
    started.clear()


@dataclass
class _StateReads:
    """A chunk's state reads in flight: one future per BatchGetItem-sized slice."""

    tags: list[Future[dict[FollowedKey, TagState]]] = field(default_factory=list)
    targets: list[Future[dict[str, TargetState]]] = field(default_factory=list)

    def result(self) -> tuple[dict[FollowedKey, TagState], dict[str, TargetState]]:
        tags: dict[FollowedKey, TagState] = {}
        targets: dict[str, TargetState] = {}
        for f in self.tags:
            tags.update(f.result())
        for g in self.targets:
            targets.update(g.result())
        return tags, targets


class Poller:
    def __init__(
        self,
        detector: Detector,
        resolver: BatchResolver,
        state: State,
        registry_settings: Callable[[str], Registry],
        *,
        clock: Callable[[], int] = now_ms,
        monotonic: Callable[[], float] = time.monotonic,
        chunk: int = 250,
        workers: int = 16,
        reserve_seconds: float = 15.0,
        channels: Channels | None = None,
    ) -> None:
        self._detector = detector
        self._resolver = resolver
        self._state = state
        self._settings = registry_settings
        self._clock = clock
        self._monotonic = monotonic
        self._chunk = chunk
        self._workers = workers
        self._reserve = reserve_seconds
        self._attestations = AttestationFilter(resolver, registry_settings)
        self._channels = channels
        self._tags: dict[FollowedKey, ImageRef] = {}  # the last run's tags, parsed (the same next run)
        self._cursors: dict[str, PollPass] = {}  # each part's pass as this poller last read or left it

    def run(
        self,
        followed: Iterable[FollowedImage],
        *,
        trigger: Trigger = Trigger.POLL,
        correlation_id: str | None = None,
        remaining_ms: Callable[[], int] | None = None,
        part: PollPart = WHOLE,
    ) -> PollSummary:
        """``part``: the part of a poll split across invocations that ``followed`` is (its own
        cursor, its shards' settled digests)."""
        items = {f.image: f for f in merge_followed(followed)}
        summary, begun = PollSummary(), self._clock()
        settles: list[
            tuple[FollowedKey, Digest, int]
        ] = []  # found settled this run: written together at the end
        with ThreadPoolExecutor(max_workers=self._workers) as pool:
            # The cursor: a poller that ran this part before starts where it left it and reads the
            # cursor while the first chunks resolve (below); a new one reads it while the refs are
            # worked out (a channel's listing) and waits for it. The settled digests are read once
            # the first chunks are asked for: none of these reads waits for another.
            cold = items and part.name not in self._cursors
            cursor_read = pool.submit(self._state.cursor.get, part) if cold else None
            refs, moved = self._refs(items, summary)
            at = self._cursors.get(part.name, PollPass()) if cursor_read is None else cursor_read.result()
            chunks = at.chunks(refs.polled, self._chunk)
            settled: dict[str, str] = {}  # read while the first chunk resolves (below)
            deadline = (
                None if remaining_ms is None else self._monotonic() + remaining_ms() / 1000 - self._reserve
            )
            started: list[Future[dict[ImageRef, Resolution | RegistryError]]] = []

            def start(limit: int) -> None:
                """Start the next chunks' resolutions, up to chunk ``limit``, keeping ``AHEAD``
                resolving: the registry never waits for a chunk's answers to be recorded (or for the
                settled digests), its bounds queue the requests of the chunk after. None after the
                deadline."""
                while (
                    len(started) < min(limit, len(chunks))
                    and sum(not f.done() for f in started[-AHEAD:]) < AHEAD
                    and not (deadline is not None and self._monotonic() >= deadline)
                ):
                    chunk = chunks[len(started)]
                    started.append(self._resolver.start_many([refs[i] for i in chunk], deadline=deadline))

            if chunks:
                # The registry's answers do not depend on the settled digests: chunks resolve while
                # they are read (which of a chunk's tags need their own items read waits for it),
                # at most WHILE_READING. The first are asked for before the read starts: the
                # registry has work before the read's large answer competes for the CPU.
                start(WHILE_READING)
                cursor_read = cursor_read or pool.submit(self._state.cursor.get, part)
                reading = pool.submit(self._state.digests.all, None if part.whole else part.shards)
                if (stored := cursor_read.result()) != at:  # another run moved it: start again there
                    _cancel(started)
                    at, chunks[:] = stored, stored.chunks(refs.polled, self._chunk)
                    start(WHILE_READING)
                while not reading.done():
                    waiting: list[Future[Any]] = [reading, *(f for f in started if not f.done())]
                    wait(waiting, return_when=FIRST_COMPLETED)
                    start(WHILE_READING)
                settled = reading.result()
                for image in moved:  # a channel's head moved (its digest may not have): record the move
                    settled.pop(image, None)
            reads = [self._read_state(pool, [items[i] for i in c if i not in settled]) for c in chunks[:1]]
            rest: list[FollowedKey] = []  # not finished this run: the next one starts there
            for n, chunk in enumerate(chunks):
                if n == len(started):  # out of time before it started
                    rest = [i for c in chunks[n:] for i in c]
                    break
                resolved = started[n].result()
                start(n + 1 + AHEAD)
                if n + 1 < len(started):  # its items are read while this chunk is recorded
                    reads.append(
                        self._read_state(pool, [items[i] for i in chunks[n + 1] if i not in settled])
                    )
                self._record(
                    pool,
                    [items[i] for i in chunk],
                    refs,
                    resolved,
                    reads[n],
                    settled,
                    settles,
                    summary,
                    trigger,
                    correlation_id,
                )
                if unfinished := [i for i in chunk if refs[i] not in resolved]:
                    rest = unfinished + [i for c in chunks[n + 1 :] for i in c]
                    break
            summary.not_reached = len(rest)
            summary.cursor = rest[0] if rest else None
            self._settle(pool, settles)
        if chunks:
            self._leave(summary, at, part, begun)
        return summary

    def _leave(self, summary: PollSummary, at: PollPass, part: PollPart, begun: int) -> None:
        """The pass where the run (begun at ``begun``) stopped, from ``at``, written only when it
        moves: a steady poll writes nothing. Whether the part is behind (``PollPass.behind``)."""
        left, now = at.after(summary.cursor, begun), self._clock()
        summary.behind = at.behind(summary.cursor, now)
        if left != at:
            self._state.cursor.put(left, now, part)
        self._cursors[part.name] = left
        if summary.cursor:
            logger.warning(
                "poll stopped for the time budget; the next run continues",
                extra={"cursor": summary.cursor, "not_reached": summary.not_reached},
            )

    def _refs(
        self, items: dict[FollowedKey, FollowedImage], summary: PollSummary
    ) -> tuple[PollRefs, set[FollowedKey]]:
        """What to resolve for each followed image: its tag, or a version channel's head; and the
        channels whose head moves (to be recorded even when the new version has the old digest)."""
        tags = {image: f for image, f in items.items() if f.policy is None}
        # a followed tag's ref is its key's, parsed: kept for the next run (the tags it follows)
        self._tags = {image: ref for image in tags if (ref := self._tags.get(image)) is not None}
        refs = PollRefs(tags, self._tags)
        moved: set[FollowedKey] = set()
        channels = [f for f in items.values() if f.policy is not None]
        if not channels:
            return refs, moved
        if self._channels is None:
            raise ValueError("version channels are followed but the poller cannot list tags")
        for image, head in self._channels.heads(channels).items():
            if head.error is not None:  # not checked this run: the head and its digest stay
                summary.errors += 1
                noted = guarded(partial(self._detector.record_error, items[image], head.error))
                summary.results.append(noted or Observation(image, TagOutcome.ERROR, error=head.error))
            elif head.ref is not None:
                refs[image] = head.ref  # polled from now on (PollRefs.polled)
                if head.moved:
                    moved.add(image)
            else:
                summary.results.append(
                    Observation(image, TagOutcome.IGNORED, reason="no version the policy allows yet")
                )
        return refs, moved

    # The settled digests are a cache: failing to update one costs a read next run, nothing else.
    def _settle(self, pool: ThreadPoolExecutor, settles: list[tuple[FollowedKey, Digest, int]]) -> None:
        """Every tag found settled this run, one group per shard side by side (each group a few
        writes of its shard's item)."""
        groups: dict[str, list[tuple[FollowedKey, Digest, int]]] = {}
        for entry in settles:
            groups.setdefault(shard(entry[0]), []).append(entry)
        for group, error in zip(groups.values(), pool.map(self._settle_group, groups.values()), strict=True):
            if error is not None:
                logger.warning(
                    "settling digests failed",
                    extra={"images": len(group), "first": group[0][0], "error": error},
                )

    def _settle_group(self, group: list[tuple[FollowedKey, Digest, int]]) -> str | None:
        try:
            self._state.digests.settle_many(group)
        except Exception as exc:
            return repr(exc)
        return None

    def _drop(self, image: FollowedKey) -> None:
        try:
            self._state.digests.drop(image)
        except Exception as exc:
            logger.warning("dropping a settled digest failed", extra={"image": image, "error": repr(exc)})

    def _read_state(self, pool: ThreadPoolExecutor, chunk: list[FollowedImage]) -> _StateReads:
        images = [f.image for f in chunk]
        ids = list(dict.fromkeys(t.id for f in chunk for t in f.targets))
        return _StateReads(
            tags=[
                pool.submit(self._state.tags.get_many, images[i : i + BATCH_KEYS])
                for i in range(0, len(images), BATCH_KEYS)
            ],
            targets=[
                pool.submit(self._state.targets.get_many, ids[i : i + BATCH_KEYS])
                for i in range(0, len(ids), BATCH_KEYS)
            ],
        )

    def _record(
        self,
        pool: ThreadPoolExecutor,
        chunk: list[FollowedImage],
        refs: dict[FollowedKey, ImageRef],
        resolved: dict[ImageRef, Resolution | RegistryError],
        reads: _StateReads,
        settled: dict[str, str],
        settles: list[tuple[FollowedKey, Digest, int]],
        summary: PollSummary,
        trigger: Trigger,
        correlation_id: str | None,
    ) -> None:
        done = [f for f in chunk if refs[f.image] in resolved]
        summary.resolved += len(done)
        rest: list[FollowedImage] = []
        for f in done:
            answer = resolved[refs[f.image]]
            if isinstance(answer, Resolution) and settled.get(f.image) == answer.digest:
                summary.unchanged += 1  # the steady case: nothing of its own read or written
            else:
                rest.append(f)
        # A settled tag that moved: its items were not read ahead (they rarely are needed).
        moved = [f for f in rest if f.image in settled]
        stored, targets = reads.result()
        more = self._read_state(pool, moved).result() if moved else ({}, {})
        stored, targets = {**stored, **more[0]}, {**targets, **more[1]}
        work: list[Callable[[], Observation | None]] = []
        for f in rest:
            answer = resolved[refs[f.image]]
            if not isinstance(answer, Resolution):
                if f.image in settled:
                    work.append(partial(self._drop, f.image))
                work.append(partial(self._detector.record_error, f, answer))
                continue
            known = stored.get(f.image)
            if (
                known is not None
                and known.digest == answer.digest
                and not known.last_error
                and (f.policy is None or known.version == refs[f.image].tag)  # a channel's head stays
                and all(
                    (st := targets.get(t.id)) is not None and st.settled_at(answer.digest) for t in f.targets
                )
            ):
                summary.unchanged += 1
                settles.append((f.image, answer.digest, known.changed_at))
                continue
            if known is not None and self._attestations.only_attestations(
                refs[f.image], known.digest, answer
            ):
                summary.ignored += 1
                summary.results.append(
                    Observation(
                        f.image,
                        TagOutcome.IGNORED,
                        digest=answer.digest,
                        previous_digest=known.digest,
                        reason="attestation-only change",
                    )
                )
                continue
            work.append(
                partial(
                    self._detector.observe,
                    f,
                    answer,
                    trigger=trigger,
                    correlation_id=correlation_id,
                    known=known,
                    targets={t.id: st for t in f.targets if (st := targets.get(t.id)) is not None},
                )
            )
        for result in pool.map(guarded, work):
            if result is None:  # bookkeeping of the settled digests
                continue
            summary.results.append(result)
            summary.changed += result.outcome is TagOutcome.CHANGED
            summary.enqueued += result.enqueued
            summary.errors += result.outcome is TagOutcome.ERROR
            summary.unchanged += result.outcome is TagOutcome.UNCHANGED
