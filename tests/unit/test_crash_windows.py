"""A step that writes two things, its process dying between them, and the step run again (SQS's
redelivery, the reconciler's next run): the second write happens, exactly once. Each step's two
writes are one TransactWriteItems (both or neither), or the first is one a second run makes again.
The crash is ``tests.support.dying.Dying`` at the second write (``before`` DynamoDB has it, or
``after``, its answer lost); against moto's DynamoDB."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.adapters.kubernetes.workloads import workload_from
from tagpin.domain.config import FollowedImage, Kind, RolloutSettings, Target, Wave, WriteBackFile
from tagpin.domain.gitops.writes import FileWrite, WriteKind, WriteRequest
from tagpin.domain.messages import Trigger, Verification, VerificationKind
from tagpin.domain.moves import Move
from tagpin.ports.git import Author
from tagpin.ports.notify import RolloutEventKind
from tagpin.ports.state import ImageEvent, PromotionStatus, State, TargetStatus
from tagpin.usecases.approvals import Approvals
from tagpin.usecases.audit import Audit
from tagpin.usecases.drift import PeopleFirst
from tagpin.usecases.promote import Promoter
from tagpin.usecases.running import Observed
from tagpin.usecases.verify import Verifier
from tagpin.usecases.waves import plan
from tagpin.usecases.writeback import Writer

from tests.support.clock import FakeClock
from tests.support.cluster import FakeCluster, FakeClusters, served
from tests.support.constants import D0, D1
from tests.support.dying import Crash, Dying, Item
from tests.support.git import FakeGitRepositories
from tests.support.notify import RecordingNotifier
from tests.support.queues import ListQueue, ListVerificationQueue
from tests.support.trail import start_promotion

REPOSITORY = "registry.example.com/team/web"
IMAGE = f"{REPOSITORY}:stable"
TARGET = Target(cluster="prod", namespace="shop", kind=Kind.ROLLOUT, name="web", container="app")
NOW = 1_800_000_000_000
WHEN = ["before", "after"]


def rollout(image: str) -> Any:
    obj = served(
        Kind.ROLLOUT,
        {"replicas": 2, "strategy": {"canary": {}}},
        {"observedGeneration": "2", "phase": "Healthy", "currentPodHash": "new", "stableRS": "new"},
    )
    obj["metadata"].update(namespace="shop", name="web", resourceVersion="7")
    obj["spec"]["template"]["spec"]["containers"] = [{"name": "app", "image": image}]
    return workload_from(Kind.ROLLOUT, obj)


def verifier(store: State, clock: FakeClock) -> Verifier:
    followed = {IMAGE: FollowedImage(image=IMAGE, targets=[TARGET])}
    settings = RolloutSettings(verify_interval_seconds=10, verify_timeout_seconds=60, rollback=False)
    queue = ListVerificationQueue()
    return Verifier(
        state=store,
        workloads=FakeClusters(prod=FakeCluster([rollout(f"{IMAGE}@{D1}")])),
        followed=lambda: followed,
        settings=lambda: settings,
        verifications=queue,
        promoter=promoter(store, clock),
        notifier=None,
        clock=clock,
    )


def promoter(store: State, clock: FakeClock) -> Promoter:
    followed = {IMAGE: FollowedImage(image=IMAGE, targets=[TARGET])}
    settings = RolloutSettings(verify_interval_seconds=10, verify_timeout_seconds=60)
    return Promoter(
        state=store,
        followed=lambda: followed,
        settings=lambda: settings,
        verifications=ListVerificationQueue(),
        changes=ListQueue(),
        notifier=None,
        clock=clock,
    )


def started(store: State, status: TargetStatus, detail: str = "") -> Verification:
    """D1's promotion rolling, its one target at D1 in ``status``."""
    store.tags.record(IMAGE, D1, NOW, Trigger.POLL)
    assert start_promotion(store, IMAGE, D1, NOW)
    assert store.targets.claim(TARGET.id, IMAGE, D1, NOW, Trigger.POLL, NOW)
    previous = f"{IMAGE}@{D0}"
    assert store.targets.finish(
        TARGET.id, D1, status, NOW, trigger=Trigger.POLL, detail=detail, previous_image=previous
    )
    move = Move(image=IMAGE, digest=D1, observed_at=NOW, trigger=Trigger.POLL)
    return Verification(kind=VerificationKind.VERIFY, move=move, target_id=TARGET.id, applied_at=NOW)


def writes_event(event: ImageEvent, detail: str | None = None) -> Callable[[Item], bool]:
    """An image history item of ``event`` (with exactly ``detail``, if given)."""

    def matches(item: Item) -> bool:
        if item.get("event", {}).get("S") != event.value:
            return False
        return detail is None or item.get("detail", {}).get("S") == detail

    return matches


def events(store: State, event: ImageEvent) -> list[str]:
    return [e.detail or "" for e in store.history.of_image(IMAGE) if e.event == event.value]


@pytest.mark.parametrize("when", WHEN)
def test_a_rollback_that_dies_at_its_halt_leaves_the_failed_item_once_redelivered(
    dynamodb: Any, state_table: str, when: str
) -> None:
    """The verifier halts D1's promotion after its target failed and dies writing the halt's
    'failed' item; the verification comes back: the promotion is halted and the image's trail has
    that item exactly once. (Two writes before: the retry found the promotion halted and never
    wrote it.)"""
    why = f"{TARGET.id}: crashed looping"
    clock = FakeClock(NOW + 60_000, step=1)  # the halt's item and the rollback's: not in one ms
    dying = Dying(dynamodb, writes_event(ImageEvent.FAILED, why), when)
    first = dynamodb_state(dying, state_table)
    verification = started(first, TargetStatus.FAILED, "crashed looping")
    with pytest.raises(Crash):
        verifier(first, clock).verify(verification)
    assert dying.crashed

    clock.now += 30_000  # the message's visibility timeout: delivered again
    again = dynamodb_state(dynamodb, state_table)
    verifier(again, clock).verify(verification)
    promotion = again.promotions.get(IMAGE)
    assert promotion is not None and promotion.status is PromotionStatus.HALTED
    assert events(again, ImageEvent.FAILED).count(why) == 1, events(again, ImageEvent.FAILED)
    verifier(again, clock).verify(verification)  # and a third delivery: nothing more
    assert events(again, ImageEvent.FAILED).count(why) == 1


@pytest.mark.parametrize("when", WHEN)
def test_a_promotion_that_dies_at_its_completion_leaves_the_complete_item_once_evaluated_again(
    dynamodb: Any, state_table: str, when: str
) -> None:
    """The last wave verified, the promoter completes D1's promotion and dies writing its
    'complete' item; evaluated again: the promotion is complete and its trail says so once."""
    clock = FakeClock(NOW + 60_000)
    dying = Dying(dynamodb, writes_event(ImageEvent.COMPLETE), when)
    first = dynamodb_state(dying, state_table)
    started(first, TargetStatus.VERIFIED)
    with pytest.raises(Crash):
        promoter(first, clock).evaluate(IMAGE, D1)
    assert dying.crashed

    again = dynamodb_state(dynamodb, state_table)
    promoter(again, clock).evaluate(IMAGE, D1)
    promotion = again.promotions.get(IMAGE)
    assert promotion is not None and promotion.status is PromotionStatus.COMPLETE
    assert len(events(again, ImageEvent.COMPLETE)) == 1
    promoter(again, clock).evaluate(IMAGE, D1)
    assert len(events(again, ImageEvent.COMPLETE)) == 1


# -- the write-back: its targets' outcomes and the commit's item ---------------------------------------

REPO = "https://git.example.com/org/apps.git"
KUSTOMIZE, HELM = "prod/shop/Deployment/k/app", "prod/shop/Deployment/h/app"
FILES = {
    KUSTOMIZE: WriteBackFile(path="k/kustomization.yaml", kind="kustomize"),
    HELM: WriteBackFile(path="h/values.yaml", kind="helm", tag="image.tag"),
}


def writer(store: State, git: FakeGitRepositories) -> Writer:
    return Writer(
        repos=git,
        state=store,
        verifications=ListVerificationQueue(),
        settings=RolloutSettings,
        author=Author,
        clock=FakeClock(NOW + 1_000, step=1),
        backoff_s=0,
        sleep=lambda _s: None,
    )


def writes_outcome(target_id: str, status: TargetStatus) -> Callable[[Item], bool]:
    """A target's history item of ``status``."""
    pk = "TARGET#" + target_id
    return lambda item: item.get("pk", {}).get("S") == pk and item.get("status", {}).get("S") == status.value


@pytest.mark.parametrize("when", WHEN)
def test_a_write_back_that_dies_between_its_targets_leaves_the_commit_item_once_redelivered(
    dynamodb: Any, state_table: str, when: str
) -> None:
    """Two targets pinned in one commit; the write-back dies at the second target's 'applied' write
    (the commit pushed, the first target recorded). Delivered again: both targets applied, and the
    image's trail has the commit's item exactly once. (Before: the item was written after every
    target, so the redelivery, which finds the files saying it and makes no commit, never wrote it.)"""
    git = FakeGitRepositories()
    kustomize = f"images:\n  - name: {REPOSITORY}\n    newTag: stable\n    digest: {D0}\n"
    git.create(REPO, {FILES[KUSTOMIZE].path: kustomize, FILES[HELM].path: f"image:\n  tag: stable@{D0}\n"})
    dying = Dying(dynamodb, writes_outcome(HELM, TargetStatus.APPLIED), when)
    first = dynamodb_state(dying, state_table)
    for target in (KUSTOMIZE, HELM):
        assert first.targets.claim(target, IMAGE, D1, NOW, Trigger.POLL, NOW)
    request = WriteRequest(
        kind=WriteKind.PIN,
        repository=REPO,
        branch="main",
        move=Move(image=IMAGE, digest=D1, observed_at=NOW, trigger=Trigger.POLL),
        reference=f"{IMAGE}@{D1}",
        files=tuple(FileWrite(file=FILES[t], targets=(t,)) for t in (KUSTOMIZE, HELM)),
    )
    with pytest.raises(Crash):
        writer(first, git).write([request])
    assert dying.crashed

    again = dynamodb_state(dynamodb, state_table)
    writer(again, git).write([request])
    states = again.targets.get_many([KUSTOMIZE, HELM])
    assert {t: s.status for t, s in states.items()} == {t: TargetStatus.APPLIED for t in (KUSTOMIZE, HELM)}
    assert len(events(again, ImageEvent.COMMITTED)) == 1, events(again, ImageEvent.COMMITTED)
    writer(again, git).write([request])  # and a third delivery: nothing more
    assert len(events(again, ImageEvent.COMMITTED)) == 1


# -- the reconciler: a person's change held -----------------------------------------------------------


def people_first(store: State, notifier: RecordingNotifier) -> PeopleFirst:
    """The reconciler's drift check, the workload set back to D0 by a person."""
    cluster = FakeClusters(prod=FakeCluster([rollout(f"{IMAGE}@{D0}")]))
    return PeopleFirst(store, cluster, Audit(store, notifier), FakeClock(NOW + 60_000, step=1))


@pytest.mark.parametrize("when", WHEN)
def test_a_reconcile_that_dies_at_a_hold_leaves_the_held_item_once_run_again(
    dynamodb: Any, state_table: str, when: str
) -> None:
    """The reconciler holds a target a person set back to D0 and dies writing the image's 'held'
    item; the next run: the target is held and the image's trail says so exactly once. (Two writes
    before: the next run found the target held, left it alone, and the item was never written.)"""
    dying = Dying(dynamodb, writes_event(ImageEvent.HELD), when)
    first = dynamodb_state(dying, state_table)
    started(first, TargetStatus.VERIFIED)
    followed = FollowedImage(image=IMAGE, targets=[TARGET])
    seen = [Observed(TARGET, IMAGE, D0, "pinned")]
    tag = first.tags.get(IMAGE)
    assert tag is not None
    with pytest.raises(Crash):
        people_first(first, RecordingNotifier()).behind(seen, followed, tag, "run-1")
    assert dying.crashed

    again = dynamodb_state(dynamodb, state_table)
    notifier = RecordingNotifier()
    people_first(again, notifier).behind(seen, followed, tag, "run-2")
    st_ = again.targets.get(TARGET.id)
    assert st_ is not None and st_.status is TargetStatus.HELD and st_.held_digest == D1
    assert len(events(again, ImageEvent.HELD)) == 1, events(again, ImageEvent.HELD)
    # announced by the run whose hold was written: this one when the first wrote nothing
    assert [e.event for e in notifier.sent] == ([RolloutEventKind.HELD] if when == "before" else [])
    people_first(again, notifier).behind(seen, followed, tag, "run-3")
    assert len(events(again, ImageEvent.HELD)) == 1 and len(notifier.sent) <= 1


def test_a_removal_is_written_once_per_time_the_target_was_followed(store: State) -> None:
    """A removal written again for the same index entry (``since``: its ``seen_at``) writes
    nothing; a target followed again later (a newer entry) and dropped again is removed again."""
    assert store.targets.claim(TARGET.id, IMAGE, D1, NOW, Trigger.POLL, NOW)

    def removed() -> int:
        return len([e for e in store.history.of_target(TARGET.id) if e.status == TargetStatus.REMOVED.value])

    store.targets.remove(TARGET.id, NOW + 10, "deleted", since=NOW - 5)
    store.targets.remove(TARGET.id, NOW + 20, "deleted", since=NOW - 5)  # the next run, again
    assert removed() == 1
    st_ = store.targets.get(TARGET.id)
    assert st_ is not None and (st_.status, st_.updated_at) == (TargetStatus.REMOVED, NOW + 10)
    store.targets.remove(TARGET.id, NOW + 40, "deleted again", since=NOW + 30)  # labelled, then not
    assert removed() == 2


# -- the other steps of a promotion: a wave started, an approval's request, decision and lapse ---------

EAST = Target(cluster="east", namespace="shop", kind=Kind.ROLLOUT, name="web", container="app")
TWO_WAVES = RolloutSettings(
    verify_interval_seconds=10,
    waves=[Wave(name="canary", clusters=["prod"]), Wave(name="rest", clusters=["east"], approval=True)],
)


@pytest.mark.parametrize("when", WHEN)
def test_a_promotion_that_dies_starting_its_next_wave_leaves_the_item_once_evaluated_again(
    dynamodb: Any, state_table: str, when: str
) -> None:
    """The canary wave verified, the promoter moves D1's promotion to the next wave and dies
    writing its 'wave_started' item; evaluated again: the promotion is on the next wave and its
    trail says so once."""
    followed = {IMAGE: FollowedImage(image=IMAGE, targets=[TARGET, EAST])}
    clock = FakeClock(NOW + 60_000, step=1)

    def promoter_of(store: State) -> Promoter:
        return Promoter(
            state=store,
            followed=lambda: followed,
            settings=lambda: TWO_WAVES,
            verifications=ListVerificationQueue(),
            changes=ListQueue(),
            notifier=None,
            clock=clock,
        )

    dying = Dying(dynamodb, writes_event(ImageEvent.WAVE_STARTED), when)
    first = dynamodb_state(dying, state_table)
    started(first, TargetStatus.VERIFIED)
    with pytest.raises(Crash):
        promoter_of(first).evaluate(IMAGE, D1)
    assert dying.crashed

    again = dynamodb_state(dynamodb, state_table)
    promoter_of(again).evaluate(IMAGE, D1)
    promotion = again.promotions.get(IMAGE)
    assert promotion is not None and promotion.wave == 1
    assert len(events(again, ImageEvent.WAVE_STARTED)) == 1
    promoter_of(again).evaluate(IMAGE, D1)
    assert len(events(again, ImageEvent.WAVE_STARTED)) == 1


def approvals(store: State, clock: FakeClock, notifier: RecordingNotifier | None = None) -> Approvals:
    return Approvals(
        state=store,
        settings=lambda: TWO_WAVES,
        changes=ListQueue(),
        verifications=ListVerificationQueue(),
        notifier=notifier,
        clock=clock,
    )


@pytest.mark.parametrize("step", ["request", "lapse"])
@pytest.mark.parametrize("when", WHEN)
def test_an_approval_step_that_dies_at_its_item_leaves_it_once_run_again(
    dynamodb: Any, state_table: str, when: str, step: str
) -> None:
    """The consumer asks for the rest wave's approval (or the verifier lapses the request) and dies
    writing the image's item of it; the step comes back: its item is in the trail exactly once."""
    event = ImageEvent.AWAITING_APPROVAL if step == "request" else ImageEvent.LAPSED
    clock = FakeClock(NOW + 60_000, step=1)
    dying = Dying(dynamodb, writes_event(event), when)
    first = dynamodb_state(dying, state_table)
    started(first, TargetStatus.VERIFIED)
    wave = plan(TWO_WAVES, [TARGET, EAST])[1]
    move = Move(image=IMAGE, digest=D1, observed_at=NOW, trigger=Trigger.POLL)
    expired = Verification(kind=VerificationKind.EXPIRE, move=move, attempt=1)
    assert first.promotions.wave_verified(IMAGE, D1, 0, NOW + 1)  # the canary wave verified and soaked
    assert first.promotions.advance(IMAGE, D1, 0, NOW + 2, 1)  # the promotion is on the rest wave
    promotion = first.promotions.get(IMAGE)
    assert promotion is not None
    if step == "lapse":
        assert approvals(first, clock).request(move, promotion, wave)
        clock.now += 2 * 86_400_000  # the request's time is up
    run = (
        (lambda s: approvals(s, clock).request(move, promotion, wave))
        if step == "request"
        else (lambda s: approvals(s, clock).expire(expired))
    )
    with pytest.raises(Crash):
        run(first)
    assert dying.crashed

    again = dynamodb_state(dynamodb, state_table)
    run(again)
    assert len(events(again, event)) == 1, events(again, event)
    run(again)
    assert len(events(again, event)) == 1


@pytest.mark.parametrize(
    ("at", "when"),
    [("target", "after"), ("wave", "before"), ("wave", "after")],
)
def test_a_verification_that_dies_before_its_promotion_moved_on_completes_it_redelivered(
    dynamodb: Any, state_table: str, at: str, when: str
) -> None:
    """The one target verified, the verifier dies after writing it (before evaluating D1's
    promotion), or at the write of its wave's 'verified' item. Delivered again: the promotion is
    complete, with one 'verified' and one 'complete' item. (Before: the redelivery found the target
    verified and stopped there, and a wave whose soak had started never got its item.)"""
    clock = FakeClock(NOW + 30_000, step=1)
    dying = Dying(
        dynamodb,
        writes_outcome(TARGET.id, TargetStatus.VERIFIED)
        if at == "target"
        else writes_event(ImageEvent.VERIFIED),
        when,
    )
    first = dynamodb_state(dying, state_table)
    verification = started(first, TargetStatus.APPLIED)
    with pytest.raises(Crash):
        verifier(first, clock).verify(verification)
    assert dying.crashed

    again = dynamodb_state(dynamodb, state_table)
    verifier(again, clock).verify(verification)
    promotion = again.promotions.get(IMAGE)
    assert promotion is not None and promotion.status is PromotionStatus.COMPLETE
    assert (len(events(again, ImageEvent.VERIFIED)), len(events(again, ImageEvent.COMPLETE))) == (1, 1)
    verifier(again, clock).verify(verification)
    assert (len(events(again, ImageEvent.VERIFIED)), len(events(again, ImageEvent.COMPLETE))) == (1, 1)
