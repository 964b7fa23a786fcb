"""The write-back never moves a file backwards, keeps a person's commits and makes no empty
commit, however its requests interleave (a hypothesis state machine over the real ``Writer``, its
state on moto, an in-memory Git host: tests/support/git.py).

The tag moves (each move claims the targets, as the consumer does, and queues a write request);
requests are delivered late, out of order, twice, several in one batch; a person commits to the
same files, also between tagpin's read and its push; a digest fails and its revert is delivered.
After every step: each file says a digest no older than the newest one it said before (a revert
excepted), a target recorded applied has its file saying its digest, every line a person wrote is
still there, and a target never ends applied at an older digest than one it was claimed for."""

from __future__ import annotations

import boto3
import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from moto import mock_aws
from tagpin.adapters.dynamodb import dynamodb_state
from tagpin.domain.config import RolloutSettings, WriteBackFile
from tagpin.domain.gitops.writes import FileWrite, WriteKind, WriteRequest
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.ports.git import Author
from tagpin.ports.state import TargetStatus
from tagpin.usecases.writeback import Writer

from tests.support.aws import create_table
from tests.support.clock import FakeClock
from tests.support.constants import REGION, STATE_TABLE
from tests.support.git import FakeGitRepositories
from tests.support.queues import ListVerificationQueue

URL = "https://git.example.com/org/apps.git"
IMAGE = "registry.example.com/team/web:1.4"
WEB = "registry.example.com/team/web"
KUSTOMIZE, HELM = "prod/shop/Deployment/k/app", "prod/shop/Deployment/h/app"
FILES = {
    KUSTOMIZE: WriteBackFile(path="k/kustomization.yaml", kind="kustomize"),
    HELM: WriteBackFile(path="h/values.yaml", kind="helm", tag="image.tag"),
}


def digest(n: int) -> str:
    return "sha256:" + f"{n:x}".rjust(64, "0")


def said(files: dict[str, str], target: str) -> str:
    doc = yaml.safe_load(files[FILES[target].path])
    if target == KUSTOMIZE:
        return str(doc["images"][0]["digest"])
    return str(doc["image"]["tag"]).split("@", 1)[1]


class WriteBackRaces(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        db = boto3.client("dynamodb", region_name=REGION)
        create_table(db, STATE_TABLE, ("pk", "sk"))
        self.state = dynamodb_state(db, STATE_TABLE)
        self.git = FakeGitRepositories()
        self.git.create(
            URL,
            {
                FILES[
                    KUSTOMIZE
                ].path: f"images:\n  - name: {WEB}\n    newTag: '1.4'\n    digest: {digest(0)}\n",
                FILES[HELM].path: f"image:\n  tag: 1.4@{digest(0)}\n",
            },
        )
        self.clock = FakeClock(1_800_000_000_000, step=1_000)
        self.writer = Writer(
            repos=self.git,
            state=self.state,
            verifications=ListVerificationQueue(),
            settings=RolloutSettings,
            author=Author,
            clock=self.clock,
            attempts=8,
            backoff_s=0,
            sleep=lambda _s: None,
        )
        self.moves = 0  # the tag's moves: digest(n) observed at n
        self.sent: list[WriteRequest] = []  # every request made (delivered or not, maybe again)
        self.people: list[str] = []  # the lines a person added
        self.newest: dict[str, int] = {KUSTOMIZE: 0, HELM: 0}  # the newest digest each file said

    def teardown(self) -> None:
        self.mock.stop()

    def _request(self, kind: WriteKind, n: int, targets: list[str], reference: str) -> WriteRequest:
        return WriteRequest(
            kind=kind,
            repository=URL,
            branch="main",
            move=Move(
                image=IMAGE,
                digest=digest(n),
                observed_at=n,
                trigger=Trigger.POLL if kind is WriteKind.PIN else Trigger.ROLLBACK,
            ),
            reference=reference,
            files=tuple(FileWrite(file=FILES[t], targets=(t,)) for t in targets),
            previous={t: f"{IMAGE}@{digest(n - 1)}" for t in targets},
        )

    @rule(moved=st.sampled_from([[KUSTOMIZE], [HELM], [KUSTOMIZE, HELM]]))
    def the_tag_moves(self, moved: list[str]) -> None:
        self.moves += 1
        n = self.moves
        for target in moved:
            self.state.targets.claim(target, IMAGE, digest(n), n, Trigger.POLL, self.clock())
        self.sent.append(self._request(WriteKind.PIN, n, moved, f"{IMAGE}@{digest(n)}"))

    @precondition(lambda self: self.sent)
    @rule(data=st.data(), person_between=st.booleans())
    def deliver(self, data: st.DataObject, person_between: bool) -> None:
        batch = data.draw(st.lists(st.sampled_from(self.sent), min_size=1, max_size=3))
        if person_between:
            self.git.before_push = self._person
        self.writer.write(batch)
        self.git.before_push = None

    @rule()
    def a_person_commits(self) -> None:
        self._person()

    def _person(self) -> None:
        line = f"# reviewed by a person ({len(self.people)})"
        self.people.append(line)
        head = self.git.head(URL).files
        path = FILES[HELM].path
        self.git.commit(URL, {path: head[path] + line + "\n"}, "a person's commit")

    @precondition(lambda self: self.moves > 1)
    @rule(which=st.sampled_from([KUSTOMIZE, HELM]))
    def its_digest_fails_and_is_reverted(self, which: str) -> None:
        target = which
        st_ = self.state.targets.get(target)
        if st_ is None or st_.status not in (TargetStatus.APPLIED, TargetStatus.PENDING):
            return
        n = int(st_.digest.removeprefix("sha256:"), 16)
        if n < 1:
            return
        self.state.targets.finish(
            target, st_.digest, TargetStatus.FAILED, self.clock(), trigger=Trigger.VERIFY
        )
        revert = self._request(WriteKind.REVERT, n, [target], f"{IMAGE}@{digest(n - 1)}")
        self.writer.write([revert])
        self.newest[target] = min(self.newest[target], n - 1)  # a revert may go back, once

    @invariant()
    def never_backwards_and_nothing_lost(self) -> None:
        files = self.git.head(URL).files
        for target in (KUSTOMIZE, HELM):
            now = int(said(files, target).removeprefix("sha256:"), 16)
            assert now >= self.newest[target], (target, now, self.newest[target])
            self.newest[target] = now
            stored = self.state.targets.get(target)
            if stored is not None and stored.status is TargetStatus.APPLIED:
                assert said(files, target) == stored.digest  # applied means the file says it
        for line in self.people:
            assert line in files[FILES[HELM].path]


WriteBackRaces.TestCase.settings = settings(
    max_examples=30, stateful_step_count=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestWriteBackRaces = WriteBackRaces.TestCase
