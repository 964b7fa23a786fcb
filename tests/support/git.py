"""An in-memory Git host (``tagpin.ports.git.GitRepositories``), for tests that interleave many
writers quickly; the real one is ``git http-backend`` (tools/tagpin_local/gitserver.py), which
the integration tests use.

Branches are lists of commits (each the whole tree: path -> text). ``write`` pushes only if the
branch is still at the snapshot's head (else ``HeadMoved``), as a non-fast-forward push is refused.
``before_push`` runs just before that check: a test lands a person's commit between tagpin's read
and its push there. An empty commit (no file changed) fails the test that made it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import RolloutSettings, WriteBackFile
from tagpin.domain.gitops.writes import FileWrite, WriteKind, WriteOutcome, WriteRequest
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest
from tagpin.ports.git import Author, Branch, GitNotFound, GitRepositories, HeadMoved, Snapshot
from tagpin.ports.queues import VerificationQueue
from tagpin.ports.state import State, TargetStatus
from tagpin.usecases.writeback import Writer
from tagpin_local.gitserver import GitServer

from tests.conftest import require_binary
from tests.support.clock import FakeClock
from tests.support.queues import ListVerificationQueue


def quick_writer(
    repos: GitRepositories, state: State, clock: Callable[[], int], verifications: VerificationQueue
) -> Writer:
    """The write-back's ``Writer`` as tests drive it: default rollout settings, 3 attempts, retries
    at once (no backoff, no sleep)."""
    return Writer(
        repos=repos,
        state=state,
        verifications=verifications,
        settings=RolloutSettings,
        author=lambda: Author("tagpin", "tagpin@users.noreply.invalid"),
        clock=clock,
        attempts=3,
        backoff_s=0,
        sleep=lambda _s: None,
    )


def git_http_server(**options: Any) -> Iterator[GitServer]:
    """The real Git host for a fixture (``yield from``): ``git http-backend`` on 127.0.0.1, with
    ``GitServer``'s ``options`` (its tokens...); required where the binaries are missing under CI."""
    require_binary("git")
    require_binary("git-http-backend", "/usr/lib/git-core/git-http-backend")
    with GitServer(**options) as git:
        yield git


@dataclass
class Commit:
    id: str
    files: dict[str, str]
    message: str
    author: str


@dataclass
class FakeGitRepositories:
    branches: dict[tuple[str, str], list[Commit]] = field(default_factory=dict)
    before_push: Callable[[], None] | None = None
    reads: int = 0
    pushes: int = 0

    def create(self, url: str, files: Mapping[str, str], branch: str = "main") -> None:
        self.branches[(url, branch)] = [
            Commit(_id("", "initial", dict(files)), dict(files), "initial commit", "person")
        ]

    def head(self, url: str, branch: str = "main") -> Commit:
        return self.branches[(url, branch)][-1]

    def commit(self, url: str, files: Mapping[str, str], message: str, branch: str = "main") -> str:
        """A person's commit of ``files`` on top of the branch."""
        tree = {**self.head(url, branch).files, **files}
        made = Commit(_id(self.head(url, branch).id, message, tree), tree, message, "person")
        self.branches[(url, branch)].append(made)
        return made.id

    # -- GitRepositories -------------------------------------------------------------------

    def read(self, branch: Branch, paths: list[str]) -> Snapshot:
        self.reads += 1
        commits = self.branches.get((branch.url, branch.name))
        if not commits:
            raise GitNotFound(f"{branch.url}: no branch {branch.name!r}")
        head = commits[-1]
        return Snapshot(
            branch, head.id, {p: head.files[p].encode() if p in head.files else None for p in paths}
        )

    def write(
        self,
        snapshot: Snapshot,
        changes: Mapping[str, bytes],
        message: str,
        author: Author,
        *,
        to: str | None = None,
    ) -> str:
        assert to is None, "review branches are not modelled here"
        commits = self.branches[(snapshot.branch.url, snapshot.branch.name)]
        base = next(c for c in commits if c.id == snapshot.commit)
        tree = {**base.files, **{p: v.decode() for p, v in changes.items()}}
        assert tree != base.files, "an empty commit"
        if self.before_push is not None:
            hook, self.before_push = self.before_push, None
            hook()
        if commits[-1].id != snapshot.commit:
            raise HeadMoved(f"{snapshot.branch} moved from {snapshot.commit[:12]}")
        self.pushes += 1
        made = Commit(_id(snapshot.commit, message, tree), tree, message, author.name)
        commits.append(made)
        return made.id


def _id(parent: str, message: str, tree: Mapping[str, str]) -> str:
    text = repr((parent, message, sorted(tree.items())))
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def one_refused_one_written(
    server: GitServer,
    state: State,
    repos: GitRepositories,
    refused: Mapping[str, str],
    says: str,
    *,
    image: FollowedKey,
    digest: Digest,
    file: WriteBackFile,
    target: str,
) -> None:
    """A batch of two pins through the write-back: one to ``org/refused`` (its files ``refused``,
    which the client refuses to read) and one to ``org/small`` (``file`` alone, as in ``refused``).
    The refused repository's target is recorded ``failed`` with ``says`` after its URL and the
    repository is untouched; the other is committed and its target (``target`` + "2") applied."""
    bad = server.create("org/refused", dict(refused))
    small = server.create("org/small", {file.path: refused[file.path]})
    bad_head = server.head("org/refused")
    clock = FakeClock(1_800_000_000_000, step=1_000)
    requests = []
    for url, claimed in ((bad, target), (small, target + "2")):
        assert state.targets.claim(claimed, image, digest, 1, Trigger.POLL, clock())
        move = Move(image=image, digest=digest, observed_at=1, trigger=Trigger.POLL)
        requests.append(
            WriteRequest(
                kind=WriteKind.PIN,
                repository=url,
                branch="main",
                move=move,
                reference=f"{image}@{digest}",
                files=(FileWrite(file=file, targets=(claimed,)),),
            )
        )
    failed, written = quick_writer(repos, state, clock, ListVerificationQueue()).write(requests)
    assert failed.outcome is WriteOutcome.FAILED and says in (failed.detail or ""), failed
    st = state.targets.get(target)
    assert st is not None and st.status is TargetStatus.FAILED and st.detail is not None
    assert f"{bad}: {says}" in st.detail, st.detail
    assert server.head("org/refused") == bad_head
    assert written.outcome is WriteOutcome.COMMITTED, written
    assert server.show("org/small", file.path).endswith(f"digest: {digest}\n")
    other = state.targets.get(target + "2")
    assert other is not None and other.status is TargetStatus.APPLIED
