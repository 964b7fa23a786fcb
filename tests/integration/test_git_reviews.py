"""Pull-request mode (tagpin.usecases.gitreview, tagpin.adapters.git.reviews) against Git's own
``git http-backend`` (the review branch pushed with dulwich) and a stand-in for GitHub's and
GitLab's REST APIs (tools/tagpin_local/reviewserver.py: the endpoints the adapter uses, backed
by the Git server's repositories; not GitHub or GitLab), the token read from a ``tagpin/git/``
secret, and the state table (moto).

A pin in pull-request mode writes nothing to the deployed branch: it pushes tagpin's branch and
opens one request, whose URL is the targets' detail and in the image's history; delivered again,
it pushes nothing and opens no second request; once a person merges it, the same pin finds the
branch already saying it and the targets applied (then verified as any commit). Refused
credentials open nothing and come back later."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from tagpin.adapters.git.credentials import GitTokens
from tagpin.adapters.git.repositories import DulwichRepositories
from tagpin.adapters.git.reviews import RestReviews
from tagpin.domain.config import GitHost, GitHostKind, RolloutSettings, WriteMode
from tagpin.domain.gitops.writes import WriteOutcome, WriteRequest
from tagpin.domain.messages import Trigger
from tagpin.ports.git import Author
from tagpin.ports.state import ImageEvent, State, TargetStatus
from tagpin.usecases.writeback import Writer
from tagpin_local.gitserver import GitServer
from tagpin_local.reviewserver import ReviewServer

from tests.conftest import require_binary
from tests.integration.test_git_writeback import D1, FILES, IMAGE, KUSTOMIZATION, T_KUSTOMIZE, WRITE, request
from tests.support.clock import FakeClock
from tests.support.queues import ListVerificationQueue

pytestmark = pytest.mark.integration

WRONG = "ghp_wrong_review_0123456789abcdef"
PATH = "apps/web/kustomization.yaml"
BRANCH = "tagpin/web-1.4-" + D1.split(":")[1][:12]


class World:
    def __init__(
        self,
        git: GitServer,
        api: ReviewServer,
        state: State,
        kind: GitHostKind,
        sleep: Callable[[float], None] = lambda _s: None,
    ) -> None:
        self.git, self.api, self.state = git, api, state
        self.secrets = {"tagpin/git/local": json.dumps({"token": WRITE})}
        base = api.url if kind is GitHostKind.GITHUB else api.url + "/api/v4"
        hosts = {
            git.host: GitHost(credentials_secret="tagpin/git/local", insecure=True, kind=kind, api_url=base)
        }
        tokens = GitTokens(lambda: hosts, self.secrets.__getitem__)
        self.verifications = ListVerificationQueue()
        self.clock = FakeClock(1_800_000_000_000, step=1_000)
        self.writer = Writer(
            repos=DulwichRepositories(tokens, timeout=5, forget=tokens.forget),
            reviews=RestReviews(lambda: hosts, tokens, timeout=5, forget=tokens.forget),
            state=state,
            verifications=self.verifications,
            settings=lambda: RolloutSettings(verify_interval_seconds=7),
            author=lambda: Author("tagpin", "tagpin@users.noreply.invalid"),
            clock=self.clock,
            attempts=2,
            backoff_s=0.01,
            sleep=sleep,
        )
        self.url = git.create("org/apps", FILES)

    def pin(self) -> WriteRequest:
        return request(self.url, [T_KUSTOMIZE]).model_copy(update={"mode": WriteMode.PULL_REQUEST})

    def claim(self) -> None:
        assert self.state.targets.claim(T_KUSTOMIZE, IMAGE, D1, 1_000, Trigger.POLL, self.clock())

    def target(self) -> tuple[TargetStatus, str]:
        st = self.state.targets.get(T_KUSTOMIZE)
        assert st is not None
        return st.status, st.detail or ""


@pytest.fixture
def git() -> Iterator[GitServer]:
    require_binary("git")
    require_binary("git-http-backend", "/usr/lib/git-core/git-http-backend")
    with GitServer(tokens={WRITE: "write"}) as server:
        yield server


@pytest.mark.parametrize("kind", [GitHostKind.GITHUB, GitHostKind.GITLAB])
def test_a_pin_opens_one_request_for_review_and_is_applied_once_merged(
    git: GitServer, state: State, kind: GitHostKind
) -> None:
    with ReviewServer(git) as api:
        world = World(git, api, state, kind)
        world.claim()
        main = git.head("org/apps")
        (written,) = world.writer.write([world.pin()])
        assert written.outcome is WriteOutcome.REQUESTED
        assert git.head("org/apps") == main and git.show("org/apps", PATH) == KUSTOMIZATION  # not deployed
        assert git.branches("org/apps") == sorted(["main", BRANCH])
        assert f"digest: {D1}" in git.show("org/apps", PATH, rev=BRANCH)
        (review,) = api.reviews
        assert (review.source, review.target) == (BRANCH, "main")
        assert review.title == f"tagpin: web:1.4@{D1[:19]}" and f"target {T_KUSTOMIZE}" in review.body
        page = (
            f"{git.url}/org/apps/pull/1"
            if kind is GitHostKind.GITHUB
            else f"{git.url}/org/apps/-/merge_requests/1"
        )
        status, detail = world.target()
        assert status is TargetStatus.PENDING  # nothing reaches the cluster before the merge
        assert (
            detail
            == f"awaiting review: pull request {page} opened for {BRANCH} at {git.head('org/apps', BRANCH)}"
        )
        events = [e for e in state.history.of_image(IMAGE) if e.event == ImageEvent.COMMITTED.value]
        assert len(events) == 1 and page in (events[0].detail or "")
        assert world.verifications.sent == []  # verified after the merge, not before

        # delivered again (a redelivery, the reconciler's heal): no second push, no second request
        pushed = git.head("org/apps", BRANCH)
        (again,) = world.writer.write([world.pin()])
        assert again.outcome is WriteOutcome.REQUESTED and api.posts == 1
        assert git.head("org/apps", BRANCH) == pushed
        assert world.target()[1].startswith(f"awaiting review: pull request {page} open for {BRANCH}")

        # a person merges it: the same pin finds the branch saying it and the target applied
        assert api.merge("org/apps", 1) == pushed
        (merged,) = world.writer.write([world.pin()])
        assert merged.outcome is WriteOutcome.UNCHANGED and api.posts == 1
        assert world.target()[0] is TargetStatus.APPLIED
        ((verification, _delay),) = world.verifications.sent
        assert verification.commit == pushed


def test_refused_credentials_open_nothing_and_the_request_comes_back(git: GitServer, state: State) -> None:
    with ReviewServer(git) as api:
        world = World(git, api, state, GitHostKind.GITHUB)
        world.secrets["tagpin/git/local"] = json.dumps({"token": WRONG})
        world.claim()
        (written,) = world.writer.write([world.pin()])
        assert written.outcome is WriteOutcome.RETRY and api.posts == 0
        assert git.branches("org/apps") == ["main"]
        status, detail = world.target()
        assert status is TargetStatus.PENDING and "refused the credentials (401)" in detail
        assert WRONG not in detail
        world.secrets["tagpin/git/local"] = json.dumps({"token": WRITE})  # fixed: the next delivery opens it
        assert world.writer.write([world.pin()])[0].outcome is WriteOutcome.REQUESTED and api.posts == 1


@pytest.mark.parametrize("kind", [GitHostKind.GITHUB, GitHostKind.GITLAB])
def test_a_request_closed_without_merge_holds_the_targets_and_is_not_opened_again(
    git: GitServer, state: State, kind: GitHostKind
) -> None:
    """A person's "no" is an answer: delivered again (the reconciler's heal), nothing is pushed and
    no request opened; the target is held on the digest with the request's URL and what to do. To
    roll it after all, the person reopens the request and releases the target."""
    with ReviewServer(git) as api:
        world = World(git, api, state, kind)
        world.claim()
        (written,) = world.writer.write([world.pin()])
        assert written.outcome is WriteOutcome.REQUESTED
        (review,) = api.reviews
        pushed = git.head("org/apps", BRANCH)
        api.close("org/apps", review.number)  # a person declines it

        (again,) = world.writer.write([world.pin()])
        assert again.outcome is WriteOutcome.DECLINED
        assert api.posts == 1 and git.head("org/apps", BRANCH) == pushed  # nothing opened or pushed
        status, detail = world.target()
        page = review_page(git, kind, review.number)
        assert status is TargetStatus.HELD
        assert detail == (
            f"pull request {page} was closed without merge: held on this digest until the tag moves "
            "(to roll it after all, reopen the request and run tagpin release)"
        )
        st = state.targets.get(T_KUSTOMIZE)
        assert st is not None and st.holds(D1) and not st.holds("sha256:" + "e" * 64)  # this digest only

        # the person changes their mind: reopens it and releases the target
        api.reopen("org/apps", review.number)
        assert state.targets.release(T_KUSTOMIZE, world.clock(), reason="reopened", trigger=Trigger.MANUAL)
        world.claim()
        (reopened,) = world.writer.write([world.pin()])
        assert reopened.outcome is WriteOutcome.REQUESTED and api.posts == 1
        assert world.target() == (
            TargetStatus.PENDING,
            f"awaiting review: pull request {page} open for {BRANCH} at {pushed}",
        )
        api.merge("org/apps", review.number)
        (merged,) = world.writer.write([world.pin()])
        assert merged.outcome is WriteOutcome.UNCHANGED and world.target()[0] is TargetStatus.APPLIED


def test_a_merged_request_whose_edit_was_changed_back_is_not_opened_again(
    git: GitServer, state: State
) -> None:
    """Merged, then the deployed branch changed back by a person (a revert commit): also their
    answer; opening the same branch again would be refused by the host anyway."""
    with ReviewServer(git) as api:
        world = World(git, api, state, GitHostKind.GITHUB)
        world.claim()
        world.writer.write([world.pin()])
        (review,) = api.reviews
        api.merge("org/apps", review.number)
        git.commit_files("org/apps", {PATH: KUSTOMIZATION}, "revert the pin")  # a person changes it back
        (again,) = world.writer.write([world.pin()])
        assert again.outcome is WriteOutcome.DECLINED and api.posts == 1
        status, detail = world.target()
        assert status is TargetStatus.HELD
        assert "was merged, and the deployed branch was changed back since" in detail


def review_page(git: GitServer, kind: GitHostKind, number: int) -> str:
    if kind is GitHostKind.GITHUB:
        return f"{git.url}/org/apps/pull/{number}"
    return f"{git.url}/org/apps/-/merge_requests/{number}"


def test_a_hold_written_while_the_review_push_is_retried_is_not_proposed(
    git: GitServer, state: State
) -> None:
    """The push of the review branch fails once (503) and is tried again; a person holds the target
    in between (during the backoff). The retry reads the targets' states again, as a commit's
    retry does: the held target's file is not proposed, no branch is pushed, no request opened."""
    held: list[bool] = []

    def meanwhile(_s: float) -> None:
        held.append(
            state.targets.hold(T_KUSTOMIZE, "", world.clock(), reason="held by ana", trigger=Trigger.MANUAL)
        )

    with ReviewServer(git) as api:
        world = World(git, api, state, GitHostKind.GITHUB, sleep=meanwhile)
        world.claim()
        git.fail(503, match="/git-receive-pack")
        (written,) = world.writer.write([world.pin()])
        assert held == [True], held
        assert git.branches("org/apps") == ["main"] and api.reviews == [], (git.branches("org/apps"), written)
        assert written.outcome is WriteOutcome.SUPERSEDED, written
        assert world.target()[0] is TargetStatus.HELD
