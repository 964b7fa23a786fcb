"""A person's hold written while the write-back is committing a pin: the push lost its race (someone
pushed to the branch first) and the write-back reads the branch again to edit it on the new head.
Before that second push the targets' states are read again too, as the live patch reads its claim
again after each read of the workload: the held target's file is not written (before: the retry
edited the new head with the plan made before the hold, and the GitOps tool then applied the digest
the person held the target against). The real ``Writer``, its state on moto, an in-memory Git host."""

from __future__ import annotations

from tagpin.domain.config import WriteBackFile
from tagpin.domain.gitops.writes import FileWrite, WriteKind, WriteOutcome, WriteRequest
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.ports.state import State, TargetStatus

from tests.support.clock import FakeClock
from tests.support.git import FakeGitRepositories, quick_writer
from tests.support.queues import ListVerificationQueue
from tests.support.webhooks import PortCalls

URL = "https://git.example.com/org/apps.git"
IMAGE = "registry.example.com/team/web:1.4"
WEB = "registry.example.com/team/web"
TARGET = "prod/shop/Deployment/k/app"
FILE = WriteBackFile(path="k/kustomization.yaml", kind="kustomize")
OLD, NEW = "sha256:" + "0" * 64, "sha256:" + "1" * 64


def test_a_hold_written_while_the_push_is_retried_is_not_committed_over(store: State) -> None:
    git = FakeGitRepositories()
    git.create(
        URL,
        {
            FILE.path: f"images:\n  - name: {WEB}\n    newTag: '1.4'\n    digest: {OLD}\n",
            "README.md": "apps\n",
        },
    )
    clock = FakeClock(1_800_000_000_000, step=1_000)
    assert store.targets.claim(TARGET, IMAGE, NEW, 1, Trigger.POLL, clock())  # as the consumer does
    request = WriteRequest(
        kind=WriteKind.PIN,
        repository=URL,
        branch="main",
        move=Move(image=IMAGE, digest=NEW, observed_at=1, trigger=Trigger.POLL),
        reference=f"{IMAGE}@{NEW}",
        files=(FileWrite(file=FILE, targets=(TARGET,)),),
        previous={TARGET: f"{IMAGE}@{OLD}"},
    )

    def meanwhile() -> None:  # during the first push: someone pushes first, and a person holds
        git.commit(URL, {"README.md": "apps, reviewed\n"}, "a person's commit")
        assert store.targets.hold(TARGET, "", clock(), reason="held by ana", trigger=Trigger.MANUAL)

    git.before_push = meanwhile
    verifications = ListVerificationQueue()
    [written] = quick_writer(git, store, clock, verifications).write([request])

    assert git.head(URL).files[FILE.path].endswith(f"digest: {OLD}\n"), git.head(URL).files[FILE.path]
    assert git.pushes == 0 and written.outcome is WriteOutcome.SUPERSEDED, written
    st = store.targets.get(TARGET)
    assert st is not None and st.status is TargetStatus.HELD
    assert verifications.sent == []


def test_the_first_push_reads_the_targets_once_and_each_retry_again(store: State) -> None:
    """The plan's read of the targets' states is the first push's: read again only before a retry
    (a push that lost its race), not right after the plan (one BatchGetItem saved per group)."""
    git = FakeGitRepositories()
    git.create(URL, {FILE.path: f"images:\n  - name: {WEB}\n    newTag: '1.4'\n    digest: {OLD}\n"})
    clock = FakeClock(1_800_000_000_000, step=1_000)
    calls = PortCalls()
    counted = calls.wrap(store)
    writer = quick_writer(git, counted, clock, ListVerificationQueue())

    def request(digest: str, observed_at: int) -> WriteRequest:
        assert store.targets.claim(TARGET, IMAGE, digest, observed_at, Trigger.POLL, clock())
        return WriteRequest(
            kind=WriteKind.PIN,
            repository=URL,
            branch="main",
            move=Move(image=IMAGE, digest=digest, observed_at=observed_at, trigger=Trigger.POLL),
            reference=f"{IMAGE}@{digest}",
            files=(FileWrite(file=FILE, targets=(TARGET,)),),
        )

    [written] = writer.write([request(NEW, 1)])
    assert written.outcome is WriteOutcome.COMMITTED and git.pushes == 1, written
    assert calls.count("targets.get_many") == 1, calls.names

    calls.names.clear()  # a person's commit lands during the first push: one retry, one read more

    def person() -> None:
        git.commit(URL, {"README.md": "apps\n"}, "a person's commit")

    git.before_push = person
    [written] = writer.write([request(OLD, 2)])
    assert written.outcome is WriteOutcome.COMMITTED and git.pushes == 2, written
    assert calls.count("targets.get_many") == 2, calls.names
