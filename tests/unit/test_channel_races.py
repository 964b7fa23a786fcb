"""A channel's head never moves down by accident, however its writers interleave.

- Two push notifications of one repository (``1.5.0`` and ``1.6.0``) checked at the same time by
  the real ``WebhookService``'s queued stage (threads, a real ``Detector`` and ``Channels``, the
  state on moto):
  the head ends at ``1.6.0`` every time, and the change that pins ``1.6.0`` carries the newest
  observation (the targets' claims and the promotions order by it). Once with the interleaving
  forced (both notifications read the head before either records it, the older version writes
  last), then raced freely many times.
- A hypothesis state machine interleaves writers (notifications checked against the head, then
  recorded, with other writes landing between a writer's read and its write, and writers whose
  clocks are behind), versions marked bad, downgrades and rollbacks: the head never ends lower than
  the highest version a writer recorded while it was not marked bad (since the last downgrade or
  rollback), its digest is always that version's, and where a rollback returns it is never a
  version whose rollout failed.
- A head that fails between a writer's read and its write (the verifier blocks it): the writer
  compares again, and a rollback of the new head returns past the failed one.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import boto3
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from moto import mock_aws
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.adapters.webhooks.sources import SOURCES
from tagpin.domain.config import FollowedImage, TagpinConfig, Target
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.refs import ImageRef
from tagpin.ports.registry import OCI_MANIFEST, Resolution
from tagpin.ports.state import BadVersion, State
from tagpin.usecases.channels import Channels, Downgrades, mark_failed, return_to_previous
from tagpin.usecases.detect import Detector
from tagpin.usecases.webhook import WebhookService

from tests.support.aws import create_table
from tests.support.clock import FakeClock
from tests.support.constants import DISTRIBUTION_V1, REGION, STATE_TABLE
from tests.support.queues import ListNotificationQueue, ListQueue
from tests.support.registry import ScriptedRegistry
from tests.unit.conftest import SerializedClient

HOST = "registry.example"
TOKEN = "race-token"


def digest_of(version: str) -> str:
    return "sha256:" + version.replace(".", "").rjust(64, "0")


def rank(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def channel(repository: str) -> FollowedImage:
    return FollowedImage(
        image=f"{HOST}/{repository}",
        policy="^1",
        channel="stable",
        targets=[Target(cluster="c", name="web", container="app")],
    )


class RacingRegistry(ScriptedRegistry):
    """Resolves like ``ScriptedRegistry``; ``pause(tag)`` runs before each answer (to interleave)."""

    def __init__(self, answers: dict[str, str], pause: Callable[[str], None]) -> None:
        super().__init__(answers, media_type=OCI_MANIFEST)
        self._pause = pause

    def resolve(self, ref: ImageRef) -> Resolution:
        self._pause(ref.tag or "")
        return super().resolve(ref)


def notification(repository: str, tag: str) -> bytes:
    event = {
        "id": f"{repository}-{tag}",
        "action": "push",
        "target": {"mediaType": OCI_MANIFEST, "repository": repository, "tag": tag, "digest": digest_of(tag)},
        "request": {"host": HOST},
    }
    return json.dumps({"events": [event]}).encode()


def race(
    store: State, repository: str, pause: Callable[[str], None], queue: ListQueue | None = None
) -> ListQueue:
    """``repository``'s channel at 1.4.0; 1.5.0 and 1.6.0 notified at once (one thread each); the
    changes put on ``queue`` (a new one by default)."""
    followed = channel(repository)
    versions = ("1.4.0", "1.5.0", "1.6.0")
    registry = RacingRegistry({f"{HOST}/{repository}:{v}": digest_of(v) for v in versions}, pause)
    queue = ListQueue() if queue is None else queue
    detector = Detector(registry, store, queue, sleep=lambda _s: None)
    assert followed.channel_key is not None
    first = Resolution(followed.channel_key.at("1.4.0"), digest_of("1.4.0"), OCI_MANIFEST, "HEAD")
    detector.observe(followed, first, trigger=Trigger.POLL)
    notifications = ListNotificationQueue()
    service = WebhookService(
        sources=SOURCES,
        secrets=lambda: {"distribution": TOKEN},
        config=TagpinConfig,
        detector=lambda: detector,
        notifications=lambda: notifications,
        followed=lambda: {followed.image: followed},
        channels=lambda: Channels(registry, store),
    )
    for tag in ("1.5.0", "1.6.0"):  # answered once queued
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": DISTRIBUTION_V1}
        assert service.handle("distribution", headers, notification(repository, tag)).status == 202
    answers: dict[int, Any] = {}

    def check(index: int, body: str) -> None:  # the queued stage: the records of a batch side by side
        answers[index] = service.check_queued(body)

    threads = [threading.Thread(target=check, args=pair) for pair in enumerate(notifications.take())]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert len(answers) == len(threads) and {a.status for a in answers.values()} == {202}, answers
    stored = store.tags.get(followed.image)
    assert stored is not None
    assert (stored.version, stored.digest) == ("1.6.0", digest_of("1.6.0")), f"head moved down: {stored}"
    newest = max(queue.sent, key=lambda c: c.move.observed_at)
    assert (newest.move.tag, newest.move.digest) == ("1.6.0", digest_of("1.6.0")), queue.sent
    return queue


def test_the_older_version_recorded_last_does_not_move_the_head_down(store: State) -> None:
    """Both notifications pass the head check (1.4.0) before either is recorded; 1.6.0 is recorded
    first, 1.5.0 after it (with a later observation)."""
    both_read = threading.Barrier(2, timeout=30)
    newer_recorded, waited = threading.Event(), []

    class Announcing(ListQueue):  # a change is sent once its head was recorded
        def send(self, change: Change) -> None:
            super().send(change)
            if change.move.tag == "1.6.0":
                newer_recorded.set()

    def pause(tag: str) -> None:
        if tag in ("1.5.0", "1.6.0"):
            both_read.wait()  # both checked the head (1.4.0) before either records
        if tag == "1.5.0":
            waited.append(newer_recorded.wait(30))  # 1.6.0's thread records (and enqueues) meanwhile

    queue = race(store, "team/forced", pause, Announcing())
    assert waited == [True]
    assert [c.move.tag for c in queue.sent] == ["1.4.0", "1.6.0"]  # 1.5.0's record is stale: not enqueued


def test_notifications_raced_many_times_never_move_the_head_down(store: State) -> None:
    jitter = random.Random(7)
    lock = threading.Lock()

    def pause(_tag: str) -> None:
        with lock:
            delay = jitter.uniform(0, 0.004)
        time.sleep(delay)

    for round_ in range(40):
        race(store, f"team/raced{round_}", pause)


def test_a_head_that_fails_under_a_writer_is_not_where_its_rollback_returns(
    dynamodb: Any, state_table: str
) -> None:
    """A poll reads the head (1.1.0, rolling) and the marks (none); the verifier blocks 1.1.0 and
    marks it bad before the poll writes 1.2.0: the write compares again, and 1.2.0's rollback
    returns to 1.0.0 (where 1.1.0's targets were rolled back to), not to the failed 1.1.0."""
    client = Interleaving(dynamodb)
    store = dynamodb_state(client, state_table)
    followed = channel("team/failing")
    assert followed.policy is not None
    image, policy = followed.image, followed.policy
    for version, at in (("1.0.0", 100), ("1.1.0", 200)):
        store.heads.move(image, digest_of(version), at, Trigger.POLL, version, policy)

    def verifier_fails_the_head() -> None:
        assert store.tags.mark_bad(image, digest_of("1.1.0"), "failed", 250)
        assert mark_failed(store, image, digest_of("1.1.0"), "failed", 250) == "1.1.0"

    client.before_head_write.append(verifier_fails_the_head)
    record = store.heads.move(image, digest_of("1.2.0"), 300, Trigger.POLL, "1.2.0", policy)
    assert not client.before_head_write  # it ran between the poll's read and its write
    stored = store.tags.get(image)
    assert stored is not None and record.current == stored
    assert (stored.version, stored.rollback_version, stored.rollback_digest) == (
        "1.2.0",
        "1.0.0",
        digest_of("1.0.0"),
    )


# -- generated interleavings ----------------------------------------------------------------------

VERSIONS = ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.3.1", "1.4.0", "1.5.0"]
REPOSITORY = f"{HOST}/team/machine"


@cache
def _client() -> Any:
    """One client for every example (making one costs more than an example's calls); each example
    starts moto afresh (``mock_aws``), with an empty table."""
    return boto3.client("dynamodb", region_name=REGION)


class Interleaving(SerializedClient):
    """The state table's client, with writes that land between another writer's read and write:
    ``before_head_write`` runs (and is consumed) just before the next write of a channel's item."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.before_head_write: list[Callable[[], None]] = []

    def __getattr__(self, name: str) -> Any:
        call = super().__getattr__(name)
        if name != "update_item":
            return call

        def update_item(**request: Any) -> Any:
            if self.before_head_write and request["Key"]["pk"]["S"].startswith("TAG#"):
                self.before_head_write.pop(0)()
            return call(**request)

        return update_item


class HeadMoves(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        db = _client()
        create_table(db, STATE_TABLE, ("pk", "sk"))
        self.client = Interleaving(db)
        self.state = dynamodb_state(self.client, STATE_TABLE)
        self.clock = FakeClock(1_800_000_000_000, step=1_000)
        self.registry = ScriptedRegistry(
            {f"{REPOSITORY}:{v}": digest_of(v) for v in VERSIONS}, media_type=OCI_MANIFEST
        )
        self.followed = channel("team/machine")
        self.queue = ListQueue()
        self.channels = Channels(self.registry, self.state)
        self.floor: str | None = None  # the highest version recorded while not bad, since a reset
        self.failed: set[str] = set()  # the versions whose rollout failed (blocked as the head)
        self.observed_at = 0

    def teardown(self) -> None:
        self.mock.stop()

    def _bad(self) -> set[str]:
        return set(self.state.versions.bad([REPOSITORY]).get(REPOSITORY, {}))

    def _head(self) -> str | None:
        stored = self.state.tags.get(self.followed.image)
        return None if stored is None else stored.version

    def _record(self, version: str, skew: int) -> None:
        """A writer whose check passed: resolve, record (its clock ``skew`` ms off)."""
        now = self.clock()
        detector = Detector(self.registry, self.state, self.queue, clock=lambda: now + skew)
        assert self.followed.channel_key is not None
        resolution = Resolution(
            self.followed.channel_key.at(version), digest_of(version), OCI_MANIFEST, "HEAD"
        )
        detector.observe(self.followed, resolution, trigger=Trigger.WEBHOOK)
        if version not in self._bad() and (self.floor is None or rank(version) > rank(self.floor)):
            self.floor = version

    @rule(version=st.sampled_from(VERSIONS), skew=st.integers(-5_000, 5_000))
    def notified(self, version: str, skew: int) -> None:
        """A notification: checked against the head (read now), then recorded; the writes armed
        meanwhile land between that read and this writer's write."""
        if self.channels.pushed(self.followed, version) is not None:
            self._record(version, skew)

    @rule(version=st.sampled_from(VERSIONS), skew=st.integers(-5_000, 5_000))
    def arm(self, version: str, skew: int) -> None:
        """Another writer, whose check passed already, records just before the next head write."""
        self.client.before_head_write.append(lambda: self._record(version, skew))

    @rule(version=st.sampled_from(VERSIONS))
    def mark_bad(self, version: str) -> None:
        self.state.versions.mark_bad(
            REPOSITORY, BadVersion(version, digest_of(version), "failed", self.clock())
        )

    @rule(version=st.sampled_from(VERSIONS))
    def downgrade(self, version: str) -> None:
        if self._head() is None:
            return
        Downgrades(self.channels, self.registry, self.queue, self.clock).downgrade(
            self.followed, version, "a person"
        )
        self.floor = version

    @rule()
    def rolled_back(self) -> None:
        """The head's rollout failed and its targets were rolled back (as the verifier does: the
        head blocked, its version marked bad, the channel back to its rollback version)."""
        stored = self.state.tags.get(self.followed.image)
        if stored is None:
            return
        now = self.clock()
        if self.state.tags.mark_bad(self.followed.image, stored.digest, "failed", now):
            assert stored.version is not None
            self.failed.add(stored.version)
        mark_failed(self.state, self.followed.image, stored.digest, "failed", now)
        if (back := return_to_previous(self.state, self.followed, stored.digest, now)) is not None:
            self.floor = back

    @invariant()
    def the_head_is_never_below_what_was_seen(self) -> None:
        stored = self.state.tags.get(self.followed.image)
        if stored is None:
            return
        assert stored.version is not None and stored.digest == digest_of(stored.version)
        if self.floor is not None:
            assert rank(stored.version) >= rank(self.floor), (stored.version, self.floor)
        assert stored.observed_at >= self.observed_at  # observations never go back
        assert stored.rollback_version not in self.failed, (stored.rollback_version, self.failed)
        assert stored.rollback_digest == (
            None if stored.rollback_version is None else digest_of(stored.rollback_version)
        )
        self.observed_at = stored.observed_at


HeadMoves.TestCase.settings = settings(
    max_examples=40, stateful_step_count=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestHeadMoves = HeadMoves.TestCase
