"""A version channel's head in the state table (``Heads.move``, ``roll_back``, ``clear``)
and the use cases that move it: in version order whatever the observations' order, down only by a
person's downgrade or back to the previous version after a rollback, and a cleared version that
the channel may return to."""

from __future__ import annotations

import pytest
from tagpin.domain.config import FollowedImage, Registry, Target
from tagpin.domain.messages import Trigger
from tagpin.domain.outcomes import TagOutcome
from tagpin.domain.versions import VersionPolicy
from tagpin.ports.registry import OCI_MANIFEST
from tagpin.ports.state import BadVersion, PromotionStatus, State, TargetStatus
from tagpin.usecases.channels import Channels, Downgrades, mark_failed, return_to_previous
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller

from tests.support.clock import FakeClock
from tests.support.queues import ListQueue
from tests.support.registry import ScriptedRegistry
from tests.support.trail import end_promotion, start_promotion

REPO = "registry.example/team/web"
KEY = f"{REPO}@stable"
POLICY = VersionPolicy.parse("^1")
FOLLOWED = FollowedImage(
    image=REPO, policy="^1", channel="stable", targets=[Target(cluster="c", name="w", container="app")]
)


def d(n: int) -> str:
    return f"sha256:{n:064x}"


def head(store: State) -> tuple[str | None, str, str | None]:
    stored = store.tags.get(KEY)
    assert stored is not None
    return stored.version, stored.digest, stored.rollback_version


def move(store: State, version: str, digest: str, at: int, *, down: bool = False) -> TagOutcome:
    return store.heads.move(KEY, digest, at, Trigger.WEBHOOK, version, POLICY, down=down).result


def test_a_newer_version_moves_the_head_and_remembers_the_one_before(store: State) -> None:
    assert move(store, "1.0.0", d(1), 100) is TagOutcome.CHANGED
    assert head(store) == ("1.0.0", d(1), None)
    assert move(store, "1.1.0", d(2), 200) is TagOutcome.CHANGED
    assert head(store) == ("1.1.0", d(2), "1.0.0")
    stored = store.tags.get(KEY)
    assert stored is not None and stored.rollback_digest == d(1)


def test_an_older_version_is_stale_whatever_its_observation(store: State) -> None:
    move(store, "1.1.0", d(2), 100)
    assert move(store, "1.0.0", d(1), 10_000) is TagOutcome.STALE  # a later observation of an older version
    assert head(store)[:2] == ("1.1.0", d(2))


def test_a_newer_version_observed_by_a_clock_behind_still_moves_and_is_newest(store: State) -> None:
    move(store, "1.0.0", d(1), 5_000)
    record = store.heads.move(KEY, d(2), 4_000, Trigger.WEBHOOK, "1.1.0", POLICY)
    assert record.result is TagOutcome.CHANGED and record.current.version == "1.1.0"
    # newer than the head it replaced: its change wins the targets' claims and the promotions
    assert record.current.observed_at > 5_000 and record.current.changed_at == record.current.observed_at


def test_the_head_observed_again(store: State) -> None:
    move(store, "1.1.0", d(2), 100)
    assert move(store, "1.1.0", d(2), 200) is TagOutcome.UNCHANGED
    assert move(store, "1.1.0", d(2), 150) is TagOutcome.UNCHANGED  # an older observation: nothing written
    stored = store.tags.get(KEY)
    assert stored is not None and stored.observed_at == 200
    # the version's tag pushed again with other bytes: the newest observation wins
    assert move(store, "1.1.0", d(3), 120) is TagOutcome.STALE
    assert move(store, "1.1.0", d(3), 300) is TagOutcome.CHANGED
    assert head(store) == ("1.1.0", d(3), None)  # the version before stays what a rollback returns to


def test_the_same_bytes_under_a_newer_version_move_the_version_only(store: State) -> None:
    move(store, "1.0.0", d(1), 100)
    move(store, "1.1.0", d(2), 200)
    assert move(store, "1.1.1", d(2), 300) is TagOutcome.UNCHANGED
    assert head(store) == ("1.1.1", d(2), "1.0.0")


def test_a_version_marked_bad_never_becomes_the_head(store: State) -> None:
    move(store, "1.0.0", d(1), 100)
    store.versions.mark_bad(REPO, BadVersion("1.1.0", d(2), "rolled back", 150))
    assert move(store, "v1.1.0", d(2), 200) is TagOutcome.STALE  # any spelling of it
    assert head(store)[:2] == ("1.0.0", d(1))


def test_only_a_downgrade_moves_the_head_down(store: State) -> None:
    move(store, "1.0.0", d(1), 100)
    move(store, "1.2.0", d(3), 200)
    assert move(store, "1.0.0", d(1), 300) is TagOutcome.STALE
    assert move(store, "1.0.0", d(1), 300, down=True) is TagOutcome.CHANGED
    assert head(store) == ("1.0.0", d(1), None)  # a person's choice: nothing to return to


def test_a_tag_that_is_no_version_of_the_policy_is_refused(store: State) -> None:
    with pytest.raises(ValueError, match="not a version"):
        move(store, "latest", d(1), 100)


def test_a_rollback_returns_the_head_to_the_version_before(store: State) -> None:
    move(store, "1.0.0", d(1), 100)
    move(store, "1.1.0", d(2), 200)
    assert store.tags.mark_bad(KEY, d(2), "failed", 250)
    back = store.heads.roll_back(KEY, d(2), 260, POLICY)
    assert back is not None and (back.version, back.digest) == ("1.0.0", d(1))
    assert back.observed_at == back.changed_at == 260 and not back.blocked and back.bad_digest is None
    assert head(store) == ("1.0.0", d(1), None)
    assert store.heads.roll_back(KEY, d(2), 270, POLICY) is None  # done once: the head is no longer at it
    assert store.heads.roll_back(KEY, d(1), 280, POLICY) is None  # nothing before 1.0.0 is known


def test_a_rollback_does_not_undo_a_newer_move(store: State) -> None:
    move(store, "1.0.0", d(1), 100)
    move(store, "1.1.0", d(2), 200)
    move(store, "1.2.0", d(3), 300)  # moved on before the rollback of 1.1.0 was decided
    assert store.heads.roll_back(KEY, d(2), 400, POLICY) is None
    assert head(store)[:2] == ("1.2.0", d(3))


def test_the_failed_version_is_marked_bad_before_the_head_returns(store: State) -> None:
    move(store, "1.0.0", d(1), 100)
    move(store, "1.1.0", d(2), 200)
    assert mark_failed(store, KEY, d(2), "failed", 300) == "1.1.0"
    assert set(store.versions.bad([REPO])[REPO]) == {"1.1.0"}
    assert return_to_previous(store, FOLLOWED, d(2), 310) == "1.0.0"
    # a check that chose 1.1.0 before the rollback does not move the head back up to it
    assert move(store, "1.1.0", d(2), 320) is TagOutcome.STALE
    assert head(store)[:2] == ("1.0.0", d(1))


def test_no_return_to_a_version_a_person_held_back(store: State) -> None:
    move(store, "1.0.0", d(1), 100)
    move(store, "1.1.0", d(2), 200)
    store.versions.mark_bad(REPO, BadVersion("1.0.0", "", "held back", 150))
    mark_failed(store, KEY, d(2), "failed", 300)
    assert return_to_previous(store, FOLLOWED, d(2), 310) is None
    assert head(store)[:2] == ("1.1.0", d(2))


def fail(store: State, digest: str, at: int) -> None:
    """What the verifier does first when the head's rollout fails: the head is blocked, then its
    version is marked bad for the repository (``Verifier._roll_back``)."""
    store.tags.mark_bad(KEY, digest, "failed", at)
    mark_failed(store, KEY, digest, "failed", at)


def test_a_failed_head_is_never_where_the_next_rollback_returns(store: State) -> None:
    """1.1.0 fails; a poll moves the head to 1.2.0 before the verifier returns the channel to
    1.0.0 (so it does not: the head moved on); 1.2.0 fails too. Its targets were rolled back to
    1.0.0 (1.1.0's targets had been rolled back to it): the channel returns there, not to 1.1.0."""
    move(store, "1.0.0", d(1), 100)
    move(store, "1.1.0", d(2), 200)
    fail(store, d(2), 250)
    assert move(store, "1.2.0", d(3), 260) is TagOutcome.CHANGED
    assert head(store) == ("1.2.0", d(3), "1.0.0")  # not 1.1.0: it failed
    assert return_to_previous(store, FOLLOWED, d(2), 270) is None  # the head is no longer at 1.1.0
    fail(store, d(3), 280)
    assert return_to_previous(store, FOLLOWED, d(3), 290) == "1.0.0"
    assert head(store) == ("1.0.0", d(1), None)
    assert set(store.versions.bad([REPO])[REPO]) == {"1.1.0", "1.2.0"}


def test_a_head_marked_bad_by_another_channel_is_not_returned_to_either(store: State) -> None:
    """1.1.0 failed in another channel of the repository (marked bad, this head not blocked): a
    move from it keeps 1.0.0 as where a rollback returns."""
    move(store, "1.0.0", d(1), 100)
    move(store, "1.1.0", d(2), 200)
    store.versions.mark_bad(REPO, BadVersion("v1.1.0", d(2), "failed in beta", 250))  # another spelling
    assert move(store, "1.2.0", d(3), 260) is TagOutcome.CHANGED
    assert head(store) == ("1.2.0", d(3), "1.0.0")


def test_a_move_from_a_good_head_after_a_failed_one_returns_to_the_good_one(store: State) -> None:
    move(store, "1.0.0", d(1), 100)
    move(store, "1.1.0", d(2), 200)
    fail(store, d(2), 250)
    move(store, "1.2.0", d(3), 260)  # 1.2.0 rolls and is verified: a rollback of 1.3.0 returns to it
    assert move(store, "1.3.0", d(4), 300) is TagOutcome.CHANGED
    assert head(store) == ("1.3.0", d(4), "1.2.0")


def test_versions_marked_bad_match_whatever_their_spelling(store: State) -> None:
    """Every check of "marked bad" (``VersionSet``): a push, a rollback's return and a downgrade's
    held-back versions read ``v1.0.0`` as ``1.0.0`` and back (a head's move: above)."""
    scripted = ScriptedRegistry(
        {f"{REPO}:{v}": d(n) for n, v in enumerate(["v1.0.0", "v1.1.0", "1.2.0", "v1.3.0"], 1)},
        media_type=OCI_MANIFEST,
    )
    channels = Channels(scripted, store)
    move(store, "v1.0.0", d(1), 100)
    move(store, "v1.1.0", d(2), 200)
    store.versions.mark_bad(REPO, BadVersion("1.0.0", "", "held back", 150))  # a person held it back
    fail(store, d(2), 300)
    assert set(store.versions.bad([REPO])[REPO]) == {"1.0.0", "v1.1.0"}
    assert return_to_previous(store, FOLLOWED, d(2), 310) is None  # v1.0.0 is 1.0.0: held back
    assert head(store)[:2] == ("v1.1.0", d(2))
    assert channels.pushed(FOLLOWED, "1.1.0") is None  # marked as v1.1.0
    pushed = channels.pushed(FOLLOWED, "1.2.0")
    assert pushed is not None and pushed.tag == "1.2.0"
    # a downgrade holds back the newer versions not marked yet, in whatever spelling they are marked
    store.versions.mark_bad(REPO, BadVersion("1.3.0", "", "held back", 330))
    done = Downgrades(channels, scripted, ListQueue(), FakeClock(400, step=1)).downgrade(
        FOLLOWED, "v1.0.0", "a person"
    )
    assert done.held_back == ("1.2.0",)  # v1.1.0 and v1.3.0 are marked already (as v1.1.0, 1.3.0)
    assert store.versions.bad([REPO])[REPO]["v1.1.0"].reason == "failed"  # kept its own reason


def test_clear_takes_any_spelling_of_the_version(store: State) -> None:
    """The person types 1.1.0; the channel's head, its mark and its halted promotion say v1.1.0."""
    move(store, "v1.1.0", d(2), 200)
    start_promotion(store, KEY, d(2), 210, observed_at=200, trigger=Trigger.WEBHOOK, tag="v1.1.0")
    assert end_promotion(store, KEY, d(2), PromotionStatus.HALTED, 220, "failed")
    fail(store, d(2), 220)
    assert set(store.versions.bad([REPO])[REPO]) == {"v1.1.0"}
    scripted = ScriptedRegistry({f"{REPO}:v1.1.0": d(2)}, media_type=OCI_MANIFEST)
    downgrades = Downgrades(Channels(scripted, store), scripted, ListQueue(), FakeClock(300, step=1))
    assert downgrades.clear(FOLLOWED, "1.1.0", "a person") is True
    stored = store.tags.get(KEY)
    assert stored is not None and not stored.blocked and store.promotions.get(KEY) is None
    assert store.versions.bad([REPO]) == {}
    assert downgrades.clear(FOLLOWED, "v1.1.0", "a person") is False


def test_clear_lets_a_head_that_stayed_blocked_and_its_halted_promotion_roll_again(store: State) -> None:
    """A version rejected at an approval (or failed with nothing before it): the head stayed on it,
    blocked, its promotion halted. After `tagpin clear` the channel rolls it again."""
    move(store, "1.1.0", d(2), 200)
    start_promotion(store, KEY, d(2), 210, observed_at=200, trigger=Trigger.WEBHOOK, tag="1.1.0")
    assert end_promotion(store, KEY, d(2), PromotionStatus.HALTED, 220, "rejected")
    assert store.tags.mark_bad(KEY, d(2), "rejected", 220)
    store.versions.mark_bad(REPO, BadVersion("1.1.0", d(2), "rejected", 220))
    scripted = ScriptedRegistry({f"{REPO}:1.1.0": d(2)}, media_type=OCI_MANIFEST)
    queue = ListQueue()
    downgrades = Downgrades(Channels(scripted, store), scripted, queue, FakeClock(300, step=1))
    assert downgrades.clear(FOLLOWED, "1.1.0", "a person") is True
    stored = store.tags.get(KEY)
    assert stored is not None and not stored.blocked and store.promotions.get(KEY) is None
    assert store.versions.bad([REPO]) == {}
    assert downgrades.clear(FOLLOWED, "1.1.0", "a person") is False  # nothing left to clear
    # the next check enqueues it again, and a promotion of it starts
    Detector(scripted, store, queue).detect(
        FOLLOWED, trigger=Trigger.POLL, ref=FOLLOWED.channel_key.at("1.1.0")
    )  # type: ignore[union-attr]
    (change,) = queue.sent
    assert (change.move.tag, change.move.digest) == ("1.1.0", d(2))
    started = start_promotion(store, KEY, d(2), 400, observed_at=change.move.observed_at)
    assert started is not None and started.started and started.status is PromotionStatus.ROLLING


def test_a_poll_records_a_new_version_with_the_same_bytes(store: State) -> None:
    """1.1.1 is pushed with 1.1.0's bytes: the head's version moves (its digest does not), so the
    targets are pinned to repository:1.1.1@<digest>."""
    scripted = ScriptedRegistry({f"{REPO}:1.1.0": d(2)}, media_type=OCI_MANIFEST, clock=FakeClock(1000.0))

    def poll() -> None:
        Poller(
            Detector(scripted, store, ListQueue()),
            scripted,
            store,
            lambda _host: Registry(),
            monotonic=scripted.clock,
            channels=Channels(scripted, store),
        ).run([FOLLOWED])

    poll()
    (target,) = FOLLOWED.targets  # it runs the head: the next poll settles the digest
    assert store.targets.claim(target.id, KEY, d(2), 1, Trigger.POLL, 2)
    assert store.targets.finish(target.id, d(2), TargetStatus.APPLIED, 3, trigger=Trigger.POLL)
    poll()
    assert store.digests.all() == {KEY: d(2)}  # settled: a steady poll reads nothing of its own
    assert head(store)[:2] == ("1.1.0", d(2))
    scripted.answers[f"{REPO}:1.1.1"] = d(2)
    poll()
    assert head(store)[:2] == ("1.1.1", d(2))
