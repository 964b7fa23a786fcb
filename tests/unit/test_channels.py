"""Version channels through the use cases: the poller resolves a channel at its head (one listing per
repository), the head only moves up, versions marked bad are never chosen again, a push is checked
against the policy without listing, and the change names the version it pins to."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from tagpin.domain.config import FollowedImage, Registry, Target
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.refs import ImageRef
from tagpin.domain.shards import WHOLE
from tagpin.domain.versions import VersionPolicy
from tagpin.ports.registry import OCI_MANIFEST, RegistryUnavailable, TagListing
from tagpin.ports.state import BadVersion, State
from tagpin.usecases.channels import Channels, decide
from tagpin.usecases.detect import Detector
from tagpin.usecases.poll import Poller

from tests.support.clock import FakeClock
from tests.support.queues import ListQueue
from tests.support.registry import ScriptedRegistry

HOST = "registry.example"
REPO = f"{HOST}/team/web"


def digest(n: int) -> str:
    return f"sha256:{n:064x}"


def channel(policy: str = "~1.4", name: str | None = None, targets: int = 1) -> FollowedImage:
    return FollowedImage(
        image=REPO,
        policy=policy,
        channel=name,
        targets=[Target(cluster="c", name=f"w{i}", container="app") for i in range(targets)],
    )


def registry(versions: dict[str, int]) -> ScriptedRegistry:
    """The repository's tags (tag -> digest number); every tag resolves to its digest."""
    return ScriptedRegistry(
        {f"{REPO}:{tag}": digest(n) for tag, n in versions.items()},
        media_type=OCI_MANIFEST,
        clock=FakeClock(1000.0),
    )


def poll(scripted: ScriptedRegistry, store: State, queue: ListQueue, *followed: FollowedImage) -> None:
    Poller(
        Detector(scripted, store, queue),
        scripted,
        store,
        lambda _host: Registry(),
        monotonic=scripted.clock,
        channels=Channels(scripted, store),
    ).run(list(followed))


def test_the_newest_allowed_version_is_pinned_and_only_it_is_resolved(store: State) -> None:
    scripted = registry({"1.4.0": 1, "1.4.1": 2, "1.5.0-rc.1": 3, "2.0.0": 4, "latest": 4})
    queue = ListQueue()
    followed = channel("~1.4")
    poll(scripted, store, queue, followed)
    assert scripted.listed == [REPO]  # one listing
    assert scripted.calls == [f"{REPO}:1.4.1"]  # only the head is resolved, not every tag
    (change,) = queue.sent
    assert (
        change.move.image == f"{REPO}@semver:~1.4"
        and change.move.tag == "1.4.1"
        and change.move.digest == digest(2)
    )
    assert change.model_copy().move.tag == "1.4.1"
    stored = store.tags.get(followed.image)
    assert stored is not None and stored.version == "1.4.1" and stored.digest == digest(2)


def test_one_listing_serves_every_channel_of_a_repository(store: State) -> None:
    scripted = registry({"1.4.1": 2, "1.5.0-rc.1": 3, "2.0.0": 4})
    queue = ListQueue()
    candidate = FollowedImage(
        image=REPO,
        policy={"kind": "semver", "prereleases": True},
        channel="candidate",
        targets=[Target(cluster="c", name="stage", container="app")],
    )
    stable = FollowedImage(
        image=REPO, policy="^1", channel="stable", targets=[Target(cluster="c", name="prod", container="app")]
    )
    poll(scripted, store, queue, candidate, stable)
    assert scripted.listed == [REPO]
    assert {(c.move.image, c.move.tag) for c in queue.sent} == {
        (f"{REPO}@candidate", "2.0.0"),
        (f"{REPO}@stable", "1.4.1"),
    }


def test_the_head_never_moves_back_when_the_newest_is_deleted(store: State) -> None:
    queue = ListQueue()
    poll(registry({"1.4.1": 2, "1.4.2": 3}), store, queue, channel())
    assert [c.move.tag for c in queue.sent] == ["1.4.2"]
    gone = registry({"1.4.1": 2})  # 1.4.2 deleted from the registry
    heads = Channels(gone, store).heads([channel()])
    head = heads[channel().image]
    assert head.tag == "1.4.2" and head.kept is not None and "older than the head 1.4.2" in head.kept


def test_a_version_marked_bad_is_never_chosen_again(store: State) -> None:
    store.versions.mark_bad(REPO, BadVersion("1.4.2", digest(3), "rolled back", 1))
    queue = ListQueue()
    poll(registry({"1.4.1": 2, "1.4.2": 3}), store, queue, channel())
    assert [c.move.tag for c in queue.sent] == ["1.4.1"]
    # cleared by a person: chosen on the next check
    assert store.versions.clear(REPO, "1.4.2")
    head = Channels(registry({"1.4.1": 2, "1.4.2": 3}), store).heads([channel()])[channel().image]
    assert head.tag == "1.4.2"


def test_a_steady_poll_reads_no_bad_versions(store: State, monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = registry({"1.4.1": 2})
    poll(scripted, store, ListQueue(), channel())
    reads: list[list[str]] = []
    original = store.versions.bad
    monkeypatch.setattr(store.versions, "bad", lambda repos: reads.append(repos) or original(repos))
    poll(scripted, store, ListQueue(), channel())
    assert reads == []  # the head did not move: the marks were not needed


def test_a_channel_whose_tags_cannot_be_listed_keeps_its_head_and_counts_an_error(store: State) -> None:
    queue = ListQueue()
    poll(registry({"1.4.1": 2}), store, queue, channel())
    down = registry({"1.4.1": 2})
    down.tag_lists[REPO] = RegistryUnavailable("503", host=HOST, status=503)
    summary = Poller(
        Detector(down, store, queue), down, store, lambda _h: Registry(), channels=Channels(down, store)
    ).run([channel()])
    assert summary.errors >= 1
    stored = store.tags.get(channel().image)
    assert stored is not None and stored.version == "1.4.1" and stored.last_error is not None


@pytest.mark.parametrize(
    ("current", "candidate", "head", "kept"),
    [
        (None, "1.4.1", "1.4.1", False),
        ("1.4.1", "1.4.2", "1.4.2", False),
        ("1.4.2", "1.4.1", "1.4.2", True),  # never backwards by accident
        ("1.4.2", "v1.4.2", "1.4.2", False),  # the same version spelt otherwise: stays
        ("1.4.2", None, "1.4.2", True),  # nothing allowed listed any more
        ("latest", "1.4.1", "1.4.1", False),  # the head is no version of the (edited) policy
    ],
)
def test_decide(current: str | None, candidate: str | None, head: str, kept: bool) -> None:
    chosen, why = decide(VersionPolicy.parse("~1.4"), current, candidate)
    assert chosen == head and (why is not None) is kept


@pytest.mark.parametrize(
    ("pushed", "moves"),
    [("1.4.2", True), ("1.4.1", False), ("1.5.0", False), ("1.4.3-rc.1", False), ("latest", False)],
)
def test_a_push_is_checked_against_the_policy_without_listing(store: State, pushed: str, moves: bool) -> None:
    scripted = registry({"1.4.1": 2})
    poll(scripted, store, ListQueue(), channel())
    listed = list(scripted.listed)
    head = Channels(scripted, store).pushed(channel(), pushed)
    assert (head is not None) is moves
    if head is not None:
        assert str(head.ref) == f"{REPO}:{pushed}"
    assert scripted.listed == listed  # nothing listed for a push


def test_a_push_of_a_version_marked_bad_moves_nothing(store: State) -> None:
    store.versions.mark_bad(REPO, BadVersion("1.4.2", digest(3), "rolled back", 1))
    assert Channels(registry({}), store).pushed(channel(), "1.4.2") is None


def test_a_change_pins_the_repository_at_the_chosen_version() -> None:
    change = Change(
        move=Move(image=f"{REPO}@stable", digest=digest(1), observed_at=1, trigger=Trigger.POLL, tag="1.4.2")
    )
    from tagpin.domain.channels import pinned_source

    assert pinned_source(change.move.image, change.move.tag) == f"{REPO}:1.4.2"
    assert pinned_source(f"{REPO}:stable", None) == f"{REPO}:stable"
    with pytest.raises(ValueError, match="names the version"):
        pinned_source(change.move.image, None)


def test_a_downgrade_holds_back_every_newer_allowed_version_and_only_those(store: State) -> None:
    """Down from 1.3.0 to 1.0.0: 1.1.0 and 1.2.0 are held back too (else the next check would move
    the head up to 1.2.0); 2.0.0 and 1.4.0-rc.1, which this channel never chooses, are left to the
    repository's other channels; a version already marked bad keeps its own reason."""
    from tagpin.usecases.channels import Downgrades

    tags = {"1.0.0": 1, "1.1.0": 2, "1.2.0": 3, "1.2.1": 4, "1.3.0": 5, "1.4.0-rc.1": 6, "2.0.0": 7}
    scripted = registry(tags)
    queue = ListQueue()
    stable = channel("^1", "stable")
    poll(scripted, store, queue, stable)
    assert [c.move.tag for c in queue.sent] == ["1.3.0"]
    store.versions.mark_bad(REPO, BadVersion("1.2.1", digest(4), "rolled back", 1))
    done = Downgrades(Channels(scripted, store), scripted, queue, FakeClock(2 * 10**12, step=1)).downgrade(
        stable, "1.0.0", "a person"
    )
    assert done.held_back == ("1.1.0", "1.2.0", "1.3.0")
    marked = store.versions.bad([REPO])[REPO]
    assert set(marked) == {"1.1.0", "1.2.0", "1.2.1", "1.3.0"} and marked["1.2.1"].reason == "rolled back"
    assert [c.move.tag for c in queue.sent] == ["1.3.0", "1.0.0"]
    poll(scripted, store, queue, stable)  # the next check keeps the head down
    stored = store.tags.get(stable.image)
    assert (
        stored is not None and stored.version == "1.0.0" and [c.move.tag for c in queue.sent][-1] == "1.0.0"
    )
    head = Channels(scripted, store).heads([channel("^2", "next")])[channel("^2", "next").image]
    assert head.tag == "2.0.0"  # another channel of the repository still chooses 2.0.0


class ListedAfterReading(ScriptedRegistry):
    """A registry whose tag listings wait (up to 30 s) until the poll's cursor is being read."""

    def __init__(self, versions: dict[str, int], reading: threading.Event) -> None:
        super().__init__(
            {f"{REPO}:{tag}": digest(n) for tag, n in versions.items()},
            media_type=OCI_MANIFEST,
            clock=FakeClock(1000.0),
        )
        self.reading = reading
        self.read_first: bool | None = None

    def list_tags(self, repository: ImageRef) -> TagListing:
        self.read_first = self.reading.wait(timeout=30)
        return super().list_tags(repository)


def test_the_cursor_is_read_while_the_channels_are_listed(store: State) -> None:
    """Where the poll starts does not depend on the channels' heads: the cursor is read while
    their tags are listed, not after (nothing is asked of the registry until both are in)."""
    reading = threading.Event()

    class Signalling:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def get(self, part: object = WHOLE) -> object:
            reading.set()
            return self.inner.get(part)  # type: ignore[attr-defined]

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

    queue = ListQueue()
    scripted = ListedAfterReading({"1.4.0": 1, "1.4.1": 2}, reading)
    signalling = dataclasses.replace(store, cursor=Signalling(store.cursor))  # type: ignore[arg-type]
    summary = Poller(
        Detector(scripted, signalling, queue),
        scripted,
        signalling,
        lambda _host: Registry(),
        monotonic=scripted.clock,
        channels=Channels(scripted, signalling),
    ).run([channel()])
    assert scripted.read_first is True
    assert (summary.changed, [c.move.tag for c in queue.sent]) == (1, ["1.4.1"])
