"""A Git server that refuses a push with a reason of 65,000 bytes (receive-pack's report
``ng <ref> <reason>``, or the reason as an error on side band 3), escape sequences and control
characters in it: Git's own smart HTTP server (``git http-backend`` on 127.0.0.1,
tools/tagpin_local/gitserver.py) answering the push as such a server would, the Git client tagpin
ships (dulwich) and the write-back (``tagpin.usecases.writeback``) with its state in moto. What the
raised error and the targets' recorded detail keep of the reason is bounded and inert text.

And a repository whose fetch is larger than the client's budget (``fetch_budget``, small here): the
fetch stops there with an error naming the budget, that repository's targets are recorded failed
with it, and the other repositories of the batch are committed."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator

import pytest
from tagpin.adapters.git.repositories import DulwichRepositories
from tagpin.domain.channels import FollowedKey
from tagpin.domain.config import WriteBackFile
from tagpin.domain.gitops.writes import FileWrite, WriteKind, WriteOutcome, WriteRequest
from tagpin.domain.messages import Trigger
from tagpin.domain.moves import Move
from tagpin.domain.refs import Digest
from tagpin.ports.git import Author, Branch, GitDenied, GitError, GitTooLarge, GitUnavailable
from tagpin.ports.state import State, TargetStatus
from tagpin_local.gitserver import GitServer

from tests.support.clock import FakeClock
from tests.support.git import git_http_server, one_refused_one_written, quick_writer
from tests.support.queues import ListVerificationQueue

pytestmark = pytest.mark.integration

WEB = "registry.example.com/team/web"
IMAGE = f"{WEB}:1.4"
OLD, NEW = "sha256:" + "0" * 64, "sha256:" + "a" * 64
TARGET = "prod/shop/Deployment/web/app"
FILE = WriteBackFile(path="apps/web/kustomization.yaml", kind="kustomize")
KUSTOMIZATION = f"images:\n  - name: {WEB}\n    newTag: '1.4'\n    digest: {OLD}\n"
# 65,000 bytes: as long as one pkt-line carries; a terminal's escapes, a bell, a carriage return
REASON = (b"\x1b[2J\x1b]0;owned\x07refused\r\n" + b"x" * 65_000)[:65_000]
KEPT = 300  # what an error or a detail keeps of a server's words
BUDGET = 256 * 1024
# 2 MB of random text: its pack is over 1 MB whatever Git compresses
LARGE = base64.b64encode(os.urandom(1_500_000)).decode()


@pytest.fixture
def server() -> Iterator[GitServer]:
    yield from git_http_server()


def bounded_and_inert(text: str) -> None:
    assert text.isprintable(), text[:200]
    assert "\x1b" not in text and "owned" in text, text[:200]
    assert "more characters not shown" in text, text[-200:]
    assert len(text) < KEPT + 300, len(text)


@pytest.mark.parametrize("fatal", [False, True], ids=["ng-report", "side-band-error"])
def test_a_refused_review_push_raises_a_bounded_inert_error(server: GitServer, fatal: bool) -> None:
    url = server.create("org/apps", {FILE.path: KUSTOMIZATION})
    repos = DulwichRepositories(lambda _host: None, timeout=5)
    snapshot = repos.read(Branch(url, "main"), [FILE.path])
    server.refuse(REASON, fatal=fatal)
    with pytest.raises(GitError) as caught:
        repos.write(snapshot, {FILE.path: b"changed\n"}, "tagpin: web", Author("t", "t@x"), to="tagpin/web")
    bounded_and_inert(str(caught.value))
    assert server.branches("org/apps") == ["main"]


@pytest.mark.parametrize("fatal", [False, True], ids=["ng-report", "side-band-error"])
def test_a_refused_commit_is_recorded_bounded_and_inert_on_its_target(
    server: GitServer, state: State, fatal: bool
) -> None:
    url = server.create("org/apps", {FILE.path: KUSTOMIZATION})
    head = server.head("org/apps")
    clock = FakeClock(1_800_000_000_000, step=1_000)
    assert state.targets.claim(TARGET, IMAGE, NEW, 1, Trigger.POLL, clock())
    server.refuse(REASON, times=3, fatal=fatal)
    request = WriteRequest(
        kind=WriteKind.PIN,
        repository=url,
        branch="main",
        move=Move(image=IMAGE, digest=NEW, observed_at=1, trigger=Trigger.POLL),
        reference=f"{IMAGE}@{NEW}",
        files=(FileWrite(file=FILE, targets=(TARGET,)),),
    )
    [written] = quick_writer(
        DulwichRepositories(lambda _host: None, timeout=5), state, clock, ListVerificationQueue()
    ).write([request])

    assert server.head("org/apps") == head
    st = state.targets.get(TARGET)
    assert st is not None and st.detail is not None
    if fatal:  # not the race: the repository's error, the request failed
        assert written.outcome in (WriteOutcome.RETRY, WriteOutcome.FAILED), written
    else:  # receive-pack refused the update: taken for a race, tried again, then later
        assert written.outcome is WriteOutcome.RETRY and st.status is TargetStatus.PENDING, written
    bounded_and_inert(written.detail)
    bounded_and_inert(st.detail)


def test_a_refusal_not_in_utf8_is_an_error_naming_the_repository(server: GitServer) -> None:
    """dulwich decodes the reason of ``ng`` as UTF-8: bytes that are not are the repository's error,
    not a ``UnicodeDecodeError`` that fails the whole batch."""
    url = server.create("org/apps", {FILE.path: KUSTOMIZATION})
    repos = DulwichRepositories(lambda _host: None, timeout=5)
    snapshot = repos.read(Branch(url, "main"), [FILE.path])
    server.refuse(b"\xff\xfe refused")
    with pytest.raises(GitError, match=f"^{url}: push failed: .*not in UTF-8"):
        repos.write(snapshot, {FILE.path: b"changed\n"}, "tagpin: web", Author("t", "t@x"), to="tagpin/web")


def test_a_fetch_larger_than_the_budget_stops_there_with_an_error_naming_it(server: GitServer) -> None:
    url = server.create("org/large", {FILE.path: KUSTOMIZATION, "blob.txt": LARGE})
    repos = DulwichRepositories(lambda _host: None, timeout=5, fetch_budget=BUDGET)
    with pytest.raises(GitTooLarge, match=f"^{url}: fetch received more than the 0.25 MiB") as caught:
        repos.read(Branch(url, "main"), [FILE.path])
    assert "budget" in str(caught.value)
    assert repos.received <= BUDGET + 1, repos.received  # read up to the budget, not the pack


def test_a_repository_over_the_budget_fails_its_targets_and_the_others_are_committed(
    server: GitServer, state: State
) -> None:
    repos = DulwichRepositories(lambda _host: None, timeout=5, fetch_budget=BUDGET)
    refused = {FILE.path: KUSTOMIZATION, "blob.txt": LARGE}
    says = "fetch received more than the 0.25 MiB"
    one_refused_one_written(
        server,
        state,
        repos,
        refused,
        says,
        image=FollowedKey(IMAGE),
        digest=Digest(NEW),
        file=FILE,
        target=TARGET,
    )


@pytest.mark.parametrize("fatal", [False, True], ids=["ng-report", "side-band-error"])
def test_a_refusal_that_quotes_status_codes_is_neither_a_denial_nor_an_outage(
    server: GitServer, fatal: bool
) -> None:
    """A server's own words are not an HTTP status: a push refused with a reason that quotes "403"
    and "503" is neither a refused token nor an unavailable server (an ``ng`` report stays what it
    was, ``HeadMoved``: the write reads the branch again). Before, the side-band error was read as a
    refused token (403): the token was forgotten and the error said it lacked write access."""
    url = server.create("org/apps", {FILE.path: KUSTOMIZATION})
    forgotten: list[str] = []
    repos = DulwichRepositories(lambda _host: None, timeout=5, forget=forgotten.append)
    snapshot = repos.read(Branch(url, "main"), [FILE.path])
    server.refuse(b"policy: pushes of 403 lines wait for the 503 freeze to end", fatal=fatal)
    with pytest.raises(GitError) as caught:
        repos.write(snapshot, {FILE.path: b"changed\n"}, "tagpin: web", Author("t", "t@x"))
    assert not isinstance(caught.value, GitDenied | GitUnavailable), repr(caught.value)
    assert "403 lines" in str(caught.value) and "write access" not in str(caught.value)
    assert forgotten == []


def test_a_repository_named_with_a_status_code_is_judged_by_the_answers_status(server: GitServer) -> None:
    """The status is read from where dulwich puts it ("unexpected http resp <status> for <url>"),
    not from anywhere in the text: a 502 from a repository whose URL holds "403" is an outage, and
    a 403 from one whose URL holds "503" is a denial."""
    forgotten: list[str] = []
    repos = DulwichRepositories(lambda _host: None, timeout=5, forget=forgotten.append)
    outage = server.create("org/app-403", {FILE.path: KUSTOMIZATION})
    server.fail(502, match="app-403")
    with pytest.raises(GitUnavailable, match="answered 502"):
        repos.read(Branch(outage, "main"), [FILE.path])
    assert forgotten == []
    denied = server.create("org/app-503", {FILE.path: KUSTOMIZATION})
    server.fail(403, match="app-503")
    with pytest.raises(GitDenied, match="403"):
        repos.read(Branch(denied, "main"), [FILE.path])
    assert len(forgotten) == 1
