"""Detector: resolve, record, and enqueue whenever a target is behind the tag (level, not edge)."""

from __future__ import annotations

from typing import Any

import pytest
from tagpin.domain.config import FollowedImage, parse_config
from tagpin.domain.outcomes import TagOutcome
from tagpin.ports.registry import RegistryError
from tagpin.ports.state import State, TargetStatus
from tagpin.usecases.detect import Detector

from tests.support.clock import FakeClock
from tests.support.constants import D1, D2, NGINX_LATEST
from tests.support.queues import ListQueue
from tests.support.registry import ScriptedRegistry

DETECT_CONFIG = parse_config(
    """
clusters:
  dev: {kubeconfig: {file: /dev/null}}
  prod: {eks: {name: prod, region: eu-west-1}}
images:
  - image: nginx
    targets:
      - {cluster: dev, name: web, container: nginx}
      - {cluster: prod, namespace: edge, name: web, container: nginx}
  - image: ghcr.io/acme/api:stable
    targets:
      - {cluster: dev, name: api, container: api}
  - image: quay.io/acme/worker:stable
    targets:
      - {cluster: prod, kind: StatefulSet, name: worker, container: worker}
"""
)
# followed images: a tag and its targets
FOLLOWED_NGINX = DETECT_CONFIG.followed[NGINX_LATEST]
API = DETECT_CONFIG.followed["ghcr.io/acme/api:stable"]
WORKER = DETECT_CONFIG.followed["quay.io/acme/worker:stable"]


def clock() -> FakeClock[int]:
    return FakeClock(10_000, step=1_000)


@pytest.fixture
def resolver() -> ScriptedRegistry:
    return ScriptedRegistry({NGINX_LATEST: D1, API.image: D1, WORKER.image: D2})


@pytest.fixture
def queue() -> ListQueue:
    return ListQueue()


@pytest.fixture
def detector(resolver: ScriptedRegistry, store: State, queue: ListQueue) -> Detector:
    return Detector(resolver, store, queue, clock=clock(), sleep=lambda _s: None)


def apply_all(store: State, followed: FollowedImage, digest: str, observed_at: int) -> None:
    """What the consumer does when every target is patched."""
    for target in followed.targets:
        assert store.targets.claim(target.id, followed.image, digest, observed_at, "poll", now=observed_at)
        assert store.targets.finish(target.id, digest, TargetStatus.APPLIED, observed_at, trigger="poll")


def test_changed_enqueues_with_the_states_observed_at(detector: Detector, store, queue) -> None:
    result = detector.detect(FOLLOWED_NGINX, trigger="poll", correlation_id="sched-1")
    assert result.outcome == "changed"
    assert result.digest == D1
    assert result.previous_digest is None
    assert result.enqueued is True
    assert result.behind == 2
    (change,) = queue.sent
    stored = store.tags.get(FOLLOWED_NGINX.image)
    assert stored is not None
    assert (change.move.image, change.move.digest, change.move.trigger, change.move.correlation_id) == (
        FOLLOWED_NGINX.image,
        D1,
        "poll",
        "sched-1",
    )
    assert change.move.observed_at == stored.observed_at
    assert result.as_dict() == {
        "image": FOLLOWED_NGINX.image,
        "outcome": "changed",
        "digest": D1,
        "enqueued": True,
        "behind": 2,
    }


def test_moved_tag_reports_the_previous_digest(detector: Detector, resolver, store, queue) -> None:
    detector.detect(FOLLOWED_NGINX, trigger="poll")
    apply_all(store, FOLLOWED_NGINX, D1, queue.sent[0].move.observed_at)
    resolver.answers[FOLLOWED_NGINX.image] = D2
    result = detector.detect(FOLLOWED_NGINX, trigger="poll")
    assert (result.outcome, result.digest, result.previous_digest) == ("changed", D2, D1)
    assert result.enqueued is True
    assert [c.move.digest for c in queue.sent] == [D1, D2]
    assert queue.sent[1].move.observed_at > queue.sent[0].move.observed_at


def test_unchanged_and_all_applied_enqueues_nothing(detector: Detector, store, queue) -> None:
    detector.detect(FOLLOWED_NGINX, trigger="poll")
    apply_all(store, FOLLOWED_NGINX, D1, queue.sent[0].move.observed_at)
    result = detector.detect(FOLLOWED_NGINX, trigger="poll")
    assert result.outcome == "unchanged"
    assert result.enqueued is False
    assert result.behind == 0
    assert len(queue.sent) == 1


def test_unchanged_with_a_target_on_an_older_digest_enqueues_again(
    detector: Detector, resolver, store, queue
) -> None:
    # Both targets were applied at D1; the tag moves to D2 but only one target gets there.
    detector.detect(FOLLOWED_NGINX, trigger="poll")
    apply_all(store, FOLLOWED_NGINX, D1, queue.sent[0].move.observed_at)
    resolver.answers[FOLLOWED_NGINX.image] = D2
    detector.detect(FOLLOWED_NGINX, trigger="poll")
    moved = queue.sent[-1]
    first, second = FOLLOWED_NGINX.targets
    store.targets.claim(first.id, FOLLOWED_NGINX.image, D2, moved.move.observed_at, "poll", now=1)
    store.targets.finish(first.id, D2, TargetStatus.APPLIED, 2, trigger="poll")

    result = detector.detect(FOLLOWED_NGINX, trigger="poll")
    assert result.outcome == "unchanged"
    assert result.enqueued is True
    assert result.behind == 1
    healing = queue.sent[-1]
    assert healing.move.digest == D2
    assert healing.move.observed_at == store.tags.get(FOLLOWED_NGINX.image).observed_at  # type: ignore[union-attr]
    assert store.targets.get(second.id).digest == D1  # type: ignore[union-attr]


@pytest.mark.parametrize("status", [TargetStatus.FAILED, TargetStatus.PENDING, TargetStatus.GONE])
def test_unchanged_with_a_target_not_applied_enqueues_again(
    detector: Detector, store, queue, status: TargetStatus
) -> None:
    detector.detect(API, trigger="poll")
    (target,) = API.targets
    store.targets.claim(target.id, API.image, D1, queue.sent[0].move.observed_at, "poll", now=1)
    if status is not TargetStatus.PENDING:
        store.targets.finish(target.id, D1, status, 2, trigger="poll", detail="Unreachable: timeout")
    result = detector.detect(API, trigger="poll")
    assert result.outcome == "unchanged"
    assert result.enqueued is True
    assert result.behind == 1
    assert [c.move.digest for c in queue.sent] == [D1, D1]


def test_unchanged_with_a_lost_message_enqueues_again(detector: Detector, queue) -> None:
    """The first change was recorded but never applied (message lost): the next poll heals it."""
    detector.detect(WORKER, trigger="webhook")
    queue.sent.clear()
    result = detector.detect(WORKER, trigger="poll")
    assert result.outcome == "unchanged"
    assert [(c.move.digest, c.move.trigger) for c in queue.sent] == [(D2, "poll")]


def test_stale_observation_enqueues_nothing(resolver, store, queue) -> None:
    # Another invocation already recorded a newer observation than this clock will produce.
    store.tags.record(FOLLOWED_NGINX.image, D2, 10**12, "webhook")
    detector = Detector(resolver, store, queue, clock=clock())
    result = detector.detect(FOLLOWED_NGINX, trigger="poll")
    assert result.outcome == TagOutcome.STALE.value
    assert result.digest == D2  # the stored, newer digest
    assert result.enqueued is False
    assert queue.sent == []
    assert store.tags.get(FOLLOWED_NGINX.image).digest == D2  # type: ignore[union-attr]


def test_hint_confirmation(detector: Detector, queue) -> None:
    assert detector.detect(FOLLOWED_NGINX, trigger="webhook", hint_digest=D1).hint_confirmed is True
    wrong = detector.detect(FOLLOWED_NGINX, trigger="webhook", hint_digest=D2)
    assert wrong.hint_confirmed is False
    assert wrong.digest == D1
    assert all(c.move.digest == D1 for c in queue.sent)
    assert detector.detect(FOLLOWED_NGINX, trigger="poll").hint_confirmed is None


def test_resolver_error_records_and_does_not_enqueue(detector: Detector, resolver, store, queue) -> None:
    detector.detect(API, trigger="poll")
    resolver.answers[API.image] = RegistryError("503 from ghcr.io", host="ghcr.io", status=503)
    result = detector.detect(API, trigger="poll")
    assert result.outcome == "error"
    assert result.error == "RegistryError: 503 from ghcr.io"
    assert result.enqueued is False
    assert len(queue.sent) == 1
    stored = store.tags.get(API.image)
    assert stored is not None
    assert stored.digest == D1
    assert stored.last_error == "RegistryError: 503 from ghcr.io"


def test_one_failing_registry_is_that_tags_error_only(detector: Detector, resolver, store, queue) -> None:
    resolver.answers[API.image] = TimeoutError("ghcr.io timed out")
    results = [detector.detect(f, trigger="poll", correlation_id="sched-2") for f in DETECT_CONFIG.images]
    assert [r.image for r in results] == [FOLLOWED_NGINX.image, API.image, WORKER.image]
    assert [r.outcome for r in results] == [TagOutcome.CHANGED, TagOutcome.ERROR, TagOutcome.CHANGED]
    assert sorted((c.move.image, c.move.digest) for c in queue.sent) == sorted(
        [(FOLLOWED_NGINX.image, D1), (WORKER.image, D2)]
    )
    assert all(c.move.correlation_id == "sched-2" for c in queue.sent)
    assert store.tags.get(API.image).last_error == "TimeoutError: ghcr.io timed out"  # type: ignore[union-attr]
    assert store.tags.get(API.image).digest == ""  # type: ignore[union-attr]  # never resolved yet

    # The registry comes back: the first successful resolution is a change and is enqueued.
    resolver.answers[API.image] = D1
    again = detector.detect(API, trigger="poll")
    assert again.outcome is TagOutcome.CHANGED
    assert again.enqueued is True
    assert (queue.sent[-1].move.image, queue.sent[-1].move.digest) == (API.image, D1)


def test_a_hint_not_yet_served_is_asked_again_until_the_registry_confirms(store, queue):
    sleeps: list[float] = []
    # a registry that tags a manifest after notifying about it
    resolver = ScriptedRegistry({NGINX_LATEST: [D1, RegistryError("500", host="docker.io", status=500), D2]})
    detector = Detector(resolver, store, queue, clock=clock(), sleep=sleeps.append)
    result = detector.detect(FOLLOWED_NGINX, trigger="webhook", hint_digest=D2)
    assert len(resolver.calls) == 3 and len(sleeps) == 2
    assert result.digest == D2 and result.hint_confirmed is True
    assert [c.move.digest for c in queue.sent] == [D2]


def test_a_hint_the_registry_never_confirms_is_ignored(store, queue):
    sleeps: list[float] = []
    resolver = ScriptedRegistry({NGINX_LATEST: D1})
    detector = Detector(resolver, store, queue, clock=clock(), sleep=sleeps.append, confirm_delays=(0.1, 0.2))
    result = detector.detect(FOLLOWED_NGINX, trigger="webhook", hint_digest=D2)
    assert len(resolver.calls) == 3 and sleeps == [0.1, 0.2]
    assert result.digest == D1 and result.hint_confirmed is False
    assert [c.move.digest for c in queue.sent] == [D1]  # the registry's answer, never the payload's


def test_without_a_hint_there_is_no_retry(store, queue):
    resolver = ScriptedRegistry({NGINX_LATEST: RegistryError("down", host="docker.io", status=503)})
    detector = Detector(resolver, store, queue, clock=clock(), sleep=lambda _s: pytest.fail("slept"))
    assert detector.detect(FOLLOWED_NGINX, trigger="poll").outcome == "error"
    assert len(resolver.calls) == 1 and queue.sent == []


def test_a_notification_of_the_digest_the_registry_confirms_writes_the_move_first(
    detector: Detector, resolver: ScriptedRegistry, queue: ListQueue, dynamodb: Any
) -> None:
    """A webhook's notification says the tag moved to its digest: when the registry confirms it,
    the move's conditional write is tried first, not the "unchanged" one that would fail. A re-push
    of the same digest pays the one failed write instead, and is still UNCHANGED."""
    detector.detect(API, trigger="poll")  # at D1
    writes: list[str] = []
    dynamodb.meta.events.register(
        "before-parameter-build.dynamodb.UpdateItem",
        lambda params, **_: writes.append(params["Key"]["pk"]["S"].split("#", 1)[0]),
    )
    resolver.answers[API.image] = D2
    moved = detector.detect(API, trigger="webhook", hint_digest=D2)
    assert (moved.outcome, moved.enqueued) == (TagOutcome.CHANGED, True)
    assert writes == ["TAG", "DIGESTS"]  # the move, then the settled-digest cache's tombstone
    writes.clear()
    again = detector.detect(API, trigger="webhook", hint_digest=D2)
    assert again.outcome == TagOutcome.UNCHANGED
    assert writes == ["TAG", "TAG"]  # the move's write fails, the "last seen" mark moves
    writes.clear()
    resolver.answers[API.image] = D1
    polled = detector.detect(API, trigger="poll")  # no notification: the common case first
    assert polled.outcome == TagOutcome.CHANGED
    assert writes == ["TAG", "TAG", "DIGESTS"]
    assert [c.move.digest for c in queue.sent][-2:] == [D2, D1]


def test_merge_followed_keeps_a_single_listing_and_merges_the_others() -> None:
    from tagpin.domain.config import Target
    from tagpin.usecases.detect import merge_followed

    def t(name: str) -> Target:
        return Target(cluster="dev", name=name, container="app")

    once = FollowedImage(image="ghcr.io/acme/once:1", targets=[t("a"), t("b")])
    twice = [
        FollowedImage(image="ghcr.io/acme/twice:1", targets=[t("c")]),
        FollowedImage(image="ghcr.io/acme/twice:1", targets=[t("d"), t("c")]),
    ]
    doubled = FollowedImage(image="ghcr.io/acme/doubled:1", targets=[t("e"), t("e")])
    merged = {f.image: f for f in merge_followed([once, *twice, doubled])}
    assert merged[once.image] is once  # listed once, targets distinct: not copied
    assert [x.name for x in merged[twice[0].image].targets] == ["c", "d"]
    assert [x.name for x in twice[0].targets] == ["c"]  # the listings themselves unchanged
    assert [x.name for x in merged[doubled.image].targets] == ["e"]
    assert [x.name for x in doubled.targets] == ["e", "e"]
